//! TLS to the server, chosen as libpq's `sslmode` and `sslrootcert` URL
//! parameters choose it (rustls; no OpenSSL):
//!
//! | `sslmode`            | encrypted        | server certificate checked          |
//! |----------------------|------------------|-------------------------------------|
//! | absent, `disable`    | no (plaintext)   | -                                   |
//! | `prefer`             | if the server can| no                                  |
//! | `require`            | yes              | no (the chain, if `sslrootcert`)    |
//! | `verify-ca`          | yes              | chain to `sslrootcert`              |
//! | `verify-full`        | yes              | chain to `sslrootcert`, and its name|
//!
//! Plaintext stays the default (libpq's is `prefer`): a deployment turns TLS
//! on by naming it. `verify-ca`/`verify-full` need `sslrootcert` (a PEM
//! file of CA certificates): there is no implicit trust store to fall back on.
//! tokio-postgres itself knows only `disable`/`prefer`/`require` and no root
//! file, so both parameters are taken out of the URL here.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

use mmc_storage::StorageError;

/// What the URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// `url` without `sslmode`/`sslrootcert`, the session's [`SslMode`], and the
/// connector that enforces the rest.
pub(crate) fn from_url(url: &str) -> Result<(String, SslMode, MakeRustlsConnect), StorageError> {
    let invalid = |m: String| StorageError::Invalid(format!("storage url: {m}"));
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut mode, mut root) = (Mode::Disable, None::<PathBuf>);
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "sslmode" => {
                mode = match v {
                    "disable" => Mode::Disable,
                    "prefer" => Mode::Prefer,
                    "require" => Mode::Require,
                    "verify-ca" => Mode::VerifyCa,
                    "verify-full" => Mode::VerifyFull,
                    other => {
                        return Err(invalid(format!(
                            "sslmode={other} is not supported; use disable, prefer, require, verify-ca or verify-full"
                        )));
                    }
                }
            }
            "sslrootcert" => root = Some(PathBuf::from(percent_decode(v))),
            _ => kept.push(pair),
        }
    }
    let url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    let roots = root.as_deref().map(read_roots).transpose()?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
        (Mode::VerifyCa | Mode::VerifyFull, None) => {
            return Err(invalid(
                "sslmode=verify-ca and verify-full need sslrootcert=<PEM file of CA certificates>"
                    .into(),
            ));
        }
        (Mode::VerifyFull, Some(roots)) => webpki(roots, &provider)?,
        // libpq's rule: `require` with a root file checks the chain.
        (Mode::VerifyCa | Mode::Require, Some(roots)) => {
            Arc::new(ChainOnly(webpki(roots, &provider)?))
        }
        (_, _) => Arc::new(Unchecked(provider.clone())),
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let ssl = match mode {
        Mode::Disable => SslMode::Disable,
        Mode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    };
    Ok((url, ssl, MakeRustlsConnect::new(config)))
}

fn read_roots(path: &std::path::Path) -> Result<RootCertStore, StorageError> {
    let invalid = |m: String| {
        StorageError::Invalid(format!("storage url: sslrootcert {}: {m}", path.display()))
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| invalid(e.to_string()))? {
        let cert = cert.map_err(|e| invalid(e.to_string()))?;
        roots.add(cert).map_err(|e| invalid(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(invalid("no certificate in the file".into()));
    }
    Ok(roots)
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StorageError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| StorageError::Invalid(format!("storage url: sslrootcert: {e}")))
}

/// `%XX` escapes of a URL parameter (a path may need them).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer`/`require` without a root file: encrypted, the certificate not
/// checked (as libpq): protects against a passive listener only.
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<(String, SslMode), String> {
        from_url(url)
            .map(|(u, m, _)| (u, m))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn tls_parameters_are_taken_out_of_the_url() {
        let (url, ssl) = parse("postgres://u@h/db?sslmode=require&application_name=x").unwrap();
        assert_eq!(url, "postgres://u@h/db?application_name=x");
        assert_eq!(ssl, SslMode::Require);
        assert_eq!(
            parse("postgres://u@h/db").unwrap(),
            ("postgres://u@h/db".to_string(), SslMode::Disable)
        );
        assert_eq!(
            parse("postgres://u@h/db?sslmode=disable").unwrap().1,
            SslMode::Disable
        );
        let e = parse("postgres://u@h/db?sslmode=verify-full").unwrap_err();
        assert!(e.contains("sslrootcert"), "{e}");
        let e = parse("postgres://u@h/db?sslmode=allow").unwrap_err();
        assert!(e.contains("not supported"), "{e}");
        let e = parse("postgres://u@h/db?sslmode=verify-ca&sslrootcert=/nonexistent%2Fca.pem")
            .unwrap_err();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
