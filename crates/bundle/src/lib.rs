//! Components carried inside the `mmc` binary: one file to deploy. `mmc
//! bundle` copies the running binary and appends the components of a folder,
//! a manifest (version, commit, each component's name and SHA-256) and a
//! trailer that says where they are; the kernel runs the executable part and
//! ignores what follows it (as `deno compile` carries a program behind its
//! runtime). At start, a binary that carries components loads them when no
//! components folder is configured; a folder still overrides them, and
//! adapters deployed through the admin API replace them as usual.
//!
//! Layout at the end of the file: `[manifest JSON][components, in manifest
//! order][manifest length: u64 LE][payload length: u64 LE][MAGIC]`.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

const MAGIC: &[u8; 16] = b"mmc-components/1";
const TRAILER: u64 = 8 + 8 + MAGIC.len() as u64;

/// Where the components loaded at start come from.
#[derive(Debug, Clone)]
pub enum ComponentsSource {
    /// Every `*.wasm` of a folder (name = file stem).
    Dir(PathBuf),
    /// Those the binary carries.
    Builtin(Arc<Bundle>),
}

impl ComponentsSource {
    /// The bytes component `name` was started with, if it was (what a
    /// rollback of an adapter deployed since goes back to).
    pub fn original(&self, name: &str) -> Option<Vec<u8>> {
        match self {
            ComponentsSource::Dir(dir) => std::fs::read(dir.join(format!("{name}.wasm"))).ok(),
            ComponentsSource::Builtin(b) => b.get(name).map(|c| c.bytes.clone()),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ComponentsSource::Dir(dir) => dir.display().to_string(),
            ComponentsSource::Builtin(_) => "(built into the binary)".into(),
        }
    }
}

/// What a bundled binary says of itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub version: String,
    pub commit: String,
    pub components: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub name: String,
    pub sha256: String,
    pub bytes: u64,
}

pub struct Component {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The components a binary carries, read whole (a few MiB).
pub struct Bundle {
    pub manifest: Manifest,
    pub components: Vec<Component>,
}

impl fmt::Debug for Bundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bundle")
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

impl Bundle {
    pub fn get(&self, name: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.name == name)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Invalid(String),
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a binary's carried components are.
pub struct Carried {
    pub manifest: Manifest,
    /// The executable part's length: where the manifest starts.
    pub executable_len: u64,
    /// Where the first component starts.
    pub components_at: u64,
}

/// The manifest at the end of `exe`, if it carries components (only the
/// trailer and the manifest are read).
pub fn manifest_of(exe: &Path) -> Result<Option<Carried>, BundleError> {
    let mut f = File::open(exe).map_err(io_at(exe))?;
    let len = f.metadata().map_err(io_at(exe))?.len();
    if len < TRAILER {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER as usize];
    f.seek(SeekFrom::Start(len - TRAILER))
        .and_then(|_| f.read_exact(&mut trailer))
        .map_err(io_at(exe))?;
    if &trailer[16..] != MAGIC {
        return Ok(None);
    }
    let manifest_len = u64::from_le_bytes(trailer[0..8].try_into().expect("8 bytes"));
    let payload_len = u64::from_le_bytes(trailer[8..16].try_into().expect("8 bytes"));
    if payload_len > len - TRAILER || manifest_len > payload_len {
        return Err(BundleError::Invalid(format!(
            "{}: its trailer names more bytes than the file has",
            exe.display()
        )));
    }
    let start = len - TRAILER - payload_len;
    let mut manifest = vec![0; manifest_len as usize];
    f.seek(SeekFrom::Start(start))
        .and_then(|_| f.read_exact(&mut manifest))
        .map_err(io_at(exe))?;
    let manifest: Manifest = serde_json::from_slice(&manifest)
        .map_err(|e| BundleError::Invalid(format!("{}: manifest: {e}", exe.display())))?;
    Ok(Some(Carried {
        manifest,
        executable_len: start,
        components_at: start + manifest_len,
    }))
}

/// The components `exe` carries, each checked against its manifest's hash.
pub fn read(exe: &Path) -> Result<Option<Bundle>, BundleError> {
    let Some(Carried {
        manifest,
        components_at: mut at,
        ..
    }) = manifest_of(exe)?
    else {
        return Ok(None);
    };
    let mut f = File::open(exe).map_err(io_at(exe))?;
    let mut components = Vec::new();
    for e in &manifest.components {
        let mut bytes = vec![0; e.bytes as usize];
        f.seek(SeekFrom::Start(at))
            .and_then(|_| f.read_exact(&mut bytes))
            .map_err(io_at(exe))?;
        at += e.bytes;
        if hex::encode(Sha256::digest(&bytes)) != e.sha256 {
            return Err(BundleError::Invalid(format!(
                "{}: component {} does not match its hash: the file is damaged",
                exe.display(),
                e.name
            )));
        }
        components.push(Component {
            name: e.name.clone(),
            bytes,
        });
    }
    Ok(Some(Bundle {
        manifest,
        components,
    }))
}

/// Writes `out`: the executable part of `exe` (without components it may
/// already carry), then every `*.wasm` of `dir`, in name order.
pub fn write(exe: &Path, dir: &Path, commit: &str, out: &Path) -> Result<Manifest, BundleError> {
    let executable_len = match manifest_of(exe)? {
        Some(carried) => carried.executable_len,
        None => std::fs::metadata(exe).map_err(io_at(exe))?.len(),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_at(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(BundleError::Invalid(format!(
            "{}: no .wasm component to carry",
            dir.display()
        )));
    }
    let mut components = Vec::new();
    let mut entries = Vec::new();
    for path in files {
        let bytes = std::fs::read(&path).map_err(io_at(&path))?;
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        entries.push(Entry {
            name,
            sha256: hex::encode(Sha256::digest(&bytes)),
            bytes: bytes.len() as u64,
        });
        components.push(bytes);
    }
    let manifest = Manifest {
        version: env!("CARGO_PKG_VERSION").into(),
        commit: commit.into(),
        components: entries,
    };
    let manifest_json = serde_json::to_vec(&manifest).expect("a manifest serialises");
    let payload_len =
        manifest_json.len() as u64 + components.iter().map(|c| c.len() as u64).sum::<u64>();
    let mut executable = vec![0; executable_len as usize];
    File::open(exe)
        .and_then(|mut f| f.read_exact(&mut executable))
        .map_err(io_at(exe))?;
    let tmp = out.with_extension("partial");
    let mut w = io::BufWriter::new(File::create(&tmp).map_err(io_at(&tmp))?);
    let written = (|| {
        w.write_all(&executable)?;
        w.write_all(&manifest_json)?;
        for c in &components {
            w.write_all(c)?;
        }
        w.write_all(&(manifest_json.len() as u64).to_le_bytes())?;
        w.write_all(&payload_len.to_le_bytes())?;
        w.write_all(MAGIC)?;
        w.flush()
    })();
    written.map_err(io_at(&tmp))?;
    drop(w);
    let mode = std::fs::metadata(exe).map_err(io_at(exe))?.permissions();
    std::fs::set_permissions(&tmp, mode).map_err(io_at(&tmp))?;
    std::fs::rename(&tmp, out).map_err(io_at(out))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_appended_to_a_binary_are_read_back_and_replaced_on_a_second_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("exe");
        std::fs::write(&exe, b"\x7fELF pretend executable").unwrap();
        let comps = dir.path().join("components");
        std::fs::create_dir(&comps).unwrap();
        std::fs::write(comps.join("b.wasm"), b"second").unwrap();
        std::fs::write(comps.join("a.wasm"), b"first").unwrap();
        std::fs::write(comps.join("notes.txt"), b"not a component").unwrap();
        assert!(read(&exe).unwrap().is_none());

        let out = dir.path().join("bundled");
        let m = write(&exe, &comps, "abc123", &out).unwrap();
        assert_eq!(
            m.components.iter().map(|c| &c.name[..]).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let b = read(&out).unwrap().expect("carries components");
        assert_eq!(b.manifest.commit, "abc123");
        assert_eq!(b.get("a").unwrap().bytes, b"first");
        assert_eq!(b.get("b").unwrap().bytes, b"second");
        assert!(
            std::fs::read(&out)
                .unwrap()
                .starts_with(b"\x7fELF pretend executable")
        );

        // Bundling a bundled binary again carries the new set only.
        std::fs::remove_file(comps.join("b.wasm")).unwrap();
        let again = dir.path().join("again");
        write(&out, &comps, "def456", &again).unwrap();
        let b = read(&again).unwrap().unwrap();
        assert_eq!(b.components.len(), 1);
        assert!(
            std::fs::read(&again)
                .unwrap()
                .starts_with(b"\x7fELF pretend executable")
        );
        assert!(
            !std::fs::read(&again)
                .unwrap()
                .windows(6)
                .any(|w| w == b"second")
        );
    }

    #[test]
    fn a_damaged_component_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("exe");
        std::fs::write(&exe, b"exe").unwrap();
        let comps = dir.path().join("c");
        std::fs::create_dir(&comps).unwrap();
        std::fs::write(comps.join("a.wasm"), b"component bytes").unwrap();
        let out = dir.path().join("out");
        write(&exe, &comps, "c", &out).unwrap();
        let mut bytes = std::fs::read(&out).unwrap();
        let at = bytes
            .windows(15)
            .rposition(|w| w == b"component bytes")
            .unwrap();
        bytes[at] = b'C';
        std::fs::write(&out, bytes).unwrap();
        let err = read(&out).unwrap_err().to_string();
        assert!(err.contains("does not match its hash"), "{err}");
    }
}
