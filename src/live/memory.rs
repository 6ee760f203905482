//! Copying a stopped process's memory: `process_vm_readv`, or `/proc/PID/mem` (opened
//! read-only) where that call is not allowed.

use std::fs::File;
use std::os::unix::fs::FileExt;

/// Pages that may fail in one mapping before the rest of it is given up (device memory and
/// similar refuse every page: no need to ask for each).
const MAX_FAILED_PAGES: u32 = 16;
const PAGE: u64 = 4096;
/// One call copies at most this much (and so knot allocates at most this much at once).
const MAX_CALL: u64 = 64 << 20;

pub(crate) enum Reader {
    VmReadv(i32),
    ProcMem(File),
}

impl Reader {
    /// Starts with `process_vm_readv`; the first read it refuses (a kernel without it, a
    /// seccomp filter) switches to `/proc/PID/mem`.
    pub(crate) fn new(pid: i32) -> Reader {
        Reader::VmReadv(pid)
    }

    /// Reads from `addr` into `buf`; the count read (the first unreadable byte ends it).
    fn read_some(&mut self, addr: u64, buf: &mut [u8]) -> usize {
        loop {
            match self {
                Reader::VmReadv(pid) => {
                    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
                    let remote = libc::iovec { iov_base: addr as usize as *mut libc::c_void, iov_len: buf.len() };
                    // SAFETY: `local` is our own writable buffer of `buf.len()` bytes; the remote
                    // side is only read by the kernel, which checks it.
                    let n = unsafe { libc::process_vm_readv(*pid, &local, 1, &remote, 1, 0) };
                    if n >= 0 {
                        return n as usize;
                    }
                    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                    if e == libc::ENOSYS || e == libc::EPERM {
                        match File::open(format!("/proc/{pid}/mem")) {
                            Ok(f) => *self = Reader::ProcMem(f),
                            Err(_) => return 0,
                        }
                        continue;
                    }
                    return 0;
                }
                Reader::ProcMem(f) => {
                    let mut done = 0;
                    while done < buf.len() {
                        match f.read_at(&mut buf[done..], addr + done as u64) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => done += n,
                        }
                    }
                    return done;
                }
            }
        }
    }

    /// Copies `[start, end)`: the pieces that could be read, each `(address, bytes)`.
    pub(crate) fn read_range(&mut self, start: u64, end: u64) -> Vec<(u64, Vec<u8>)> {
        let mut pieces: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut at = start;
        let mut failed = 0u32;
        while at < end && failed < MAX_FAILED_PAGES {
            let want = (end - at).min(MAX_CALL);
            let mut buf = vec![0u8; want as usize];
            let n = self.read_some(at, &mut buf);
            if n > 0 {
                buf.truncate(n);
                match pieces.last_mut() {
                    Some((a, b)) if *a + b.len() as u64 == at => b.extend_from_slice(&buf),
                    _ => pieces.push((at, buf)),
                }
            }
            at += n as u64;
            if (n as u64) < want {
                // Skip the page that failed.
                failed += 1;
                at = (at / PAGE + 1) * PAGE;
            }
        }
        pieces
    }
}
