//! Secret files kept by the host (the admin token, the webhook sealing key):
//! created readable by their owner only, and refused when others can read them.

use std::io::Write;
use std::path::Path;

/// The mode of a secret file that users other than its owner can read or
/// write (group or others have any bit), `None` if only its owner can: a
/// secret kept in a file is refused as ssh refuses an exposed private key.
pub fn exposed_mode(path: &Path) -> std::io::Result<Option<u32>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode();
        if mode & 0o077 != 0 {
            return Ok(Some(mode & 0o777));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(None)
}

/// Creates `path` readable by its owner only, before anything is written to it.
pub fn write(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.write_all(b"\n")?;
    file.sync_all()
}
