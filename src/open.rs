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

/// Opens `path` for reading when it is a regular file. Its type is learnt before it is opened:
/// `O_PATH` (which opens nothing: no FIFO's reader appears, no device's `open` runs) and `fstat`,
/// then the same file is opened through `/proc/self/fd/N`, so only a regular file is ever opened,
/// whatever is swapped in at the path meanwhile.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_with_metadata(path).map(|(file, _)| file)
}

/// [`open_regular`], with the `fstat` it checked the file's type by.
pub(crate) fn open_regular_with_metadata(path: &Path) -> io::Result<(File, std::fs::Metadata)> {
    use std::os::unix::fs::MetadataExt;
    let handle = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_PATH | libc::O_CLOEXEC).open(path)?;
    let meta = handle.metadata()?;
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
    let flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    let through_fd = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&handle)));
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(flags).open(&through_fd) {
        Ok(file) => file,
        // No /proc (a bare chroot): the path again, kept only when it is still the file whose
        // type was checked.
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?,
        Err(e) => return Err(e),
    };
    let opened = file.metadata()?;
    if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) || !opened.file_type().is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} changed while it was opened", path.display())));
    }
    Ok((file, opened))
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

    /// Issue 30, item 13: a FIFO is never opened. A writer blocked in `open(O_WRONLY)` on it
    /// returns only when someone opens it for reading; `open_regular` must not be that someone.
    #[test]
    fn a_fifo_is_refused_without_being_opened() {
        let dir = tempfile::tempdir().expect("scratch dir");
        let fifo = dir.path().join("lib.so");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8 path")).expect("path");
        // SAFETY: mkfifo on a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        let writer_path = fifo.clone();
        let writer = std::thread::spawn(move || {
            let opened = std::fs::OpenOptions::new().write(true).open(&writer_path);
            let _ = tx.send(opened.is_ok());
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let err = open_regular(&fifo).expect_err("a FIFO is not a regular file");
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let unblocked = rx.recv_timeout(std::time::Duration::from_millis(300)).is_ok();
        // Let the writer go whatever happened.
        let _reader = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&fifo).expect("open the FIFO to release the writer");
        writer.join().expect("writer thread");
        assert!(!unblocked, "open_regular opened the FIFO for reading (its writer was let go)");
    }

    #[test]
    fn a_regular_file_opens_and_reads() {
        use std::io::Read;
        let dir = tempfile::tempdir().expect("scratch dir");
        let path = dir.path().join("lib.so");
        std::fs::write(&path, b"\x7fELF").expect("write");
        let (mut f, meta) = open_regular_with_metadata(&path).expect("a regular file opens");
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).expect("read");
        assert_eq!((buf.as_slice(), meta.len()), (&b"\x7fELF"[..], 4));
    }

    #[test]
    fn dot_dot_stays_under_the_sysroot() {
        let root = Path::new("/nonexistent-root");
        assert_eq!(resolve(Some(root), "/../../etc/shadow"), Ok(PathBuf::from("/nonexistent-root/etc/shadow")));
    }
}
