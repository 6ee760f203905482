//! Opening a file that a dump names: regular files only, never blocking, never outside the
//! sysroot. A dump's paths are data: a FIFO would block an `open` forever, a device (`/dev/zero`)
//! never ends, `..` or a symlink could lead out of `--sysroot`, and a pseudo name (`[vdso]`,
//! `[heap]`) is no file at all.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why a path the dump names is not opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    #[error("{0:?} is not an absolute path (a pseudo name, not a file)")]
    NotAbsolute(String),
    #[error("{0:?} names a device or kernel file system (/dev, /proc, /sys)")]
    SpecialFileSystem(String),
    #[error("{path:?} leads outside the sysroot {root} (to {to})")]
    OutsideSysroot { path: String, root: String, to: String },
}

/// Opens `path` for reading when it is a regular file. The open itself cannot block
/// (`O_NONBLOCK`: a FIFO with no writer, a terminal), and the file's type is checked on the open
/// descriptor (`fstat`) before anything is read from it.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_with_metadata(path).map(|(file, _)| file)
}

/// [`open_regular`], with the `fstat` it checked the file's type by.
pub(crate) fn open_regular_with_metadata(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is {what}, not a regular file", path.display())));
    }
    Ok((file, meta))
}

/// `path` with `.` and `..` resolved lexically, as a chroot would: `..` never climbs above `/`.
fn normalized(path: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Where on this machine to look for the file the dump recorded as `dump_path`: under `sysroot`
/// (resolved there, and refused when a symlink leads out of it), or the path itself. Devices and
/// kernel file systems are refused either way.
pub(crate) fn resolve(sysroot: Option<&Path>, dump_path: &str) -> Result<PathBuf, Refused> {
    if !dump_path.starts_with('/') {
        return Err(Refused::NotAbsolute(dump_path.to_string()));
    }
    let clean = normalized(dump_path);
    if ["/dev", "/proc", "/sys"].iter().any(|p| clean.starts_with(p)) {
        return Err(Refused::SpecialFileSystem(dump_path.to_string()));
    }
    let Some(root) = sysroot else { return Ok(clean) };
    let joined = root.join(clean.strip_prefix("/").unwrap_or(&clean));
    // A path that does not exist opens nothing; one that does must stay under the root once
    // every symlink is followed.
    match (joined.canonicalize(), root.canonicalize()) {
        (Ok(real), Ok(real_root)) if !real.starts_with(&real_root) => {
            Err(Refused::OutsideSysroot { path: dump_path.to_string(), root: root.display().to_string(), to: real.display().to_string() })
        }
        (Ok(real), Ok(_)) => Ok(real),
        _ => Ok(joined),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_dot_never_climbs_above_the_root() {
        assert_eq!(normalized("/../../etc/shadow"), PathBuf::from("/etc/shadow"));
        assert_eq!(normalized("/usr/lib/../lib64/./libc.so.6"), PathBuf::from("/usr/lib64/libc.so.6"));
    }

    #[test]
    fn pseudo_names_and_devices_are_refused() {
        assert!(matches!(resolve(None, "[vdso]"), Err(Refused::NotAbsolute(_))));
        assert!(matches!(resolve(None, "/dev/zero"), Err(Refused::SpecialFileSystem(_))));
        assert!(matches!(resolve(None, "/usr/../dev/zero"), Err(Refused::SpecialFileSystem(_))));
        assert!(matches!(resolve(Some(Path::new("/nonexistent-root")), "/proc/self/mem"), Err(Refused::SpecialFileSystem(_))));
    }

    #[test]
    fn dot_dot_stays_under_the_sysroot() {
        let root = Path::new("/nonexistent-root");
        assert_eq!(resolve(Some(root), "/../../etc/shadow"), Ok(PathBuf::from("/nonexistent-root/etc/shadow")));
    }
}
