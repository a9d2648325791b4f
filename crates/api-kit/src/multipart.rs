//! `multipart/form-data` (RFC 7578) on `multer`, the parser axum uses:
//! reading a form whose body is already in memory (a component's request),
//! and writing one (the console hands an upload to `bulk`'s CSV import).
//! Lines end in CRLF, as the standard and every browser and client write them.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;

/// One part of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: String,
    pub file_name: Option<String>,
    pub body: Bytes,
}

/// Forms here have a few fields; a few more are read so that the error can
/// name the unknown one, but not thousands.
pub const MAX_PARTS: usize = 16;

/// The `boundary` parameter of a `multipart/form-data` Content-Type.
pub fn boundary(content_type: &str) -> Option<String> {
    multer::parse_boundary(content_type)
        .ok()
        .filter(|b| !b.is_empty() && b.len() <= 200)
}

/// Every part of `body`, a form whose parts `boundary` separates; what is
/// wrong with it, in words, when it cannot be read.
pub fn parse(body: &[u8], boundary: &str) -> Result<Vec<Part>, String> {
    let chunk = Bytes::copy_from_slice(body);
    let stream = futures_util::stream::once(async move { Ok::<_, std::io::Error>(chunk) });
    let mut form = multer::Multipart::new(stream, boundary);
    let read = async {
        let mut parts = Vec::new();
        while let Some(field) = form.next_field().await.map_err(|e| e.to_string())? {
            if parts.len() == MAX_PARTS {
                return Err(format!("the form has more than {MAX_PARTS} parts"));
            }
            let name = field
                .name()
                .ok_or("a part has no name in its Content-Disposition")?
                .to_string();
            let file_name = field.file_name().map(str::to_string);
            let body = field.bytes().await.map_err(|e| e.to_string())?;
            parts.push(Part {
                name,
                file_name,
                body,
            });
        }
        Ok(parts)
    };
    at_once(read).unwrap_or_else(|| Err("the body cannot be read".into()))
}

/// Runs a future that has nothing to wait for (the whole body is in
/// memory), without an executor; `None` if it waits all the same.
fn at_once<T>(future: impl Future<Output = T>) -> Option<T> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    // Each poll reads what it can; a body in memory is read in a few.
    for _ in 0..1_000 {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

/// A form of `fields` and one CSV file `(field, file name, bytes)`:
/// (its Content-Type, its body). The file name cannot leave its quotes.
pub fn encode(
    fields: &[(&str, &str)],
    file: (&str, &str, &[u8]),
    boundary: &str,
) -> (String, Vec<u8>) {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    let (name, file_name, bytes) = file;
    let file_name: String = file_name
        .chars()
        .filter(|c| !matches!(c, '"' | '\r' | '\n' | '\\'))
        .collect();
    out.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{file_name}\"\r\nContent-Type: text/csv\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(bytes);
    out.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_from_content_type() {
        assert_eq!(
            boundary("multipart/form-data; boundary=----abc123").as_deref(),
            Some("----abc123")
        );
        assert_eq!(
            boundary("Multipart/Form-Data; charset=utf-8; boundary=\"a b\"").as_deref(),
            Some("a b")
        );
        assert_eq!(boundary("text/csv; boundary=x"), None);
        assert_eq!(boundary("multipart/form-data"), None);
    }

    #[test]
    fn what_is_encoded_parses_back() {
        let csv = b"beneficiary_name,phone\r\nAwa,+229\r\n\r\n";
        let (ct, body) = encode(&[("name", "June")], ("file", "pay\"roll.csv", csv), "XX");
        let parts = parse(&body, &boundary(&ct).unwrap()).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            (parts[0].name.as_str(), &parts[0].body[..]),
            ("name", &b"June"[..])
        );
        assert_eq!(parts[1].file_name.as_deref(), Some("payroll.csv"));
        // Only the CRLF before the delimiter belongs to the framing.
        assert_eq!(&parts[1].body[..], csv);
    }

    #[test]
    fn a_preamble_and_the_boundary_inside_a_line_are_not_parts() {
        let body = b"preamble\r\n--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nline --b inside\r\n\r\n--b--\r\n";
        let parts = parse(body, "b").unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(&parts[0].body[..], b"line --b inside\r\n");
    }

    #[test]
    fn broken_bodies_are_errors() {
        assert!(parse(b"no parts here", "b").is_err());
        assert!(
            parse(
                b"--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nunterminated",
                "b"
            )
            .is_err()
        );
        assert!(
            parse(
                b"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--\r\n",
                "b"
            )
            .is_err()
        );
    }

    #[test]
    fn many_parts_and_endless_headers_are_refused() {
        let mut body = Vec::new();
        for _ in 0..=MAX_PARTS {
            body.extend_from_slice(
                b"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nv\r\n",
            );
        }
        body.extend_from_slice(b"--b--\r\n");
        let err = parse(&body, "b").unwrap_err();
        assert!(err.contains("more than 16 parts"), "{err}");

        let mut body = b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n".to_vec();
        body.extend(std::iter::repeat_n(b'h', 100_000));
        assert!(parse(&body, "b").is_err());
    }
}
