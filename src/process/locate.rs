//! Where module files and their debug files are found on disk, the way gdb looks for them:
//! `--sysroot` prefixes every path the dump names; debug files are found by build-id under each
//! debug directory (`.build-id/xx/yyyy.debug`), then by `.gnu_debuglink` beside the file, in its
//! `.debug/` folder, and under each debug directory.

use std::path::{Path, PathBuf};

/// The default debug directory, as gdb's `debug-file-directory`.
pub(crate) const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

#[derive(Debug, Clone, Default)]
pub struct Locator {
    /// Prepended to every absolute path from the dump, like gdb's `set sysroot`.
    pub sysroot: Option<PathBuf>,
    /// Searched in order for separate debug files; the default directory is searched last.
    pub debug_dirs: Vec<PathBuf>,
    /// Leave out `DEFAULT_DEBUG_DIR` (for reproducible tests on committed samples).
    pub no_default_debug_dir: bool,
    /// Directories searched for a module by its file name when it is not at its recorded path
    /// (or the file there is another build), like gdb's `solib-search-path`.
    pub search_dirs: Vec<PathBuf>,
    /// The executable to use, whatever path the dump records (`gdb PROGRAM CORE`).
    pub executable: Option<PathBuf>,
    /// Where inflated debug sections are kept between runs (`--cache-dir`); none by default.
    pub section_cache: Option<std::sync::Arc<super::SectionCache>>,
}

impl Locator {
    /// The on-disk path for a module path recorded in the dump: under the sysroot and never
    /// out of it, never a device or a pseudo name (see [`crate::open::resolve`]).
    pub(crate) fn module_path(&self, dump_path: &str) -> Result<PathBuf, crate::open::Refused> {
        crate::open::resolve(self.sysroot.as_deref(), dump_path)
    }

    /// Every place the module file may be, best first: the recorded path (under the sysroot),
    /// then each search directory with the file's name, whatever the recorded path's form
    /// (absolute, or relative as a `dlopen("./lib.so")` leaves it in the link map or an edited
    /// NT_FILE has it: `.////lib.so`), as gdb's `solib-search-path`. Build-ids decide among
    /// them. A refused recorded path leaves only the search directories; a pseudo name
    /// (`[vdso]`) is no file's name.
    pub(crate) fn module_candidates(&self, dump_path: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.module_path(dump_path).into_iter().collect();
        let name = Path::new(dump_path).file_name().filter(|n| *n != ".." && *n != "." && !dump_path.starts_with('['));
        if let Some(name) = name {
            out.extend(self.search_dirs.iter().map(|d| d.join(name)));
        }
        out
    }

    fn debug_dirs(&self) -> impl Iterator<Item = PathBuf> + '_ {
        let default = (!self.no_default_debug_dir).then(|| PathBuf::from(DEFAULT_DEBUG_DIR));
        let in_sysroot = match (&self.sysroot, self.no_default_debug_dir) {
            (Some(root), false) => Some(root.join(DEFAULT_DEBUG_DIR.trim_start_matches('/'))),
            _ => None,
        };
        self.debug_dirs.iter().cloned().chain(in_sysroot).chain(default)
    }

    /// Candidate debug files for a build-id, in search order.
    pub(crate) fn build_id_candidates(&self, build_id: &[u8]) -> Vec<PathBuf> {
        if build_id.len() < 2 {
            return Vec::new();
        }
        let hex = super::elf_file::hex(build_id);
        self.debug_dirs().map(|d| d.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..]))).collect()
    }

    /// Candidate debug files named by `.gnu_debuglink` of the file at `binary`.
    pub(crate) fn debuglink_candidates(&self, binary: &Path, link: &str) -> Vec<PathBuf> {
        // A debuglink is a bare file name; anything with a separator is not to be trusted.
        if link.is_empty() || link.contains('/') || link == ".." {
            return Vec::new();
        }
        let dir = binary.parent().unwrap_or(Path::new("/"));
        let mut out = vec![dir.join(link), dir.join(".debug").join(link)];
        let rel = dir.strip_prefix(self.sysroot.as_deref().unwrap_or(Path::new(""))).unwrap_or(dir);
        let rel = rel.strip_prefix("/").unwrap_or(rel);
        out.extend(self.debug_dirs().map(|d| d.join(rel).join(link)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysroot_prefixes_dump_paths() {
        let l = Locator { sysroot: Some("/sr".into()), ..Default::default() };
        assert_eq!(l.module_path("/lib/x86_64-linux-gnu/libc.so.6"), Ok(PathBuf::from("/sr/lib/x86_64-linux-gnu/libc.so.6")));
    }

    /// Issue 30, item 2: a relative recorded path (elfutils' `linkmap-cut.core` has
    /// `.////…/linkmap-cut-lib.so`; a `dlopen("./lib.so")` leaves `./lib.so` in the link map)
    /// is looked for by its file name in every search directory, as an absolute one is.
    #[test]
    fn relative_recorded_paths_are_searched_by_name() {
        let l = Locator { search_dirs: vec!["/s1".into(), "/s2".into()], ..Default::default() };
        for recorded in [".////////lib.so", "./lib.so", "lib.so", "sub/lib.so", "/opt/app/lib.so"] {
            let c = l.module_candidates(recorded);
            assert!(c.ends_with(&[PathBuf::from("/s1/lib.so"), PathBuf::from("/s2/lib.so")]), "{recorded}: {c:?}");
        }
        assert!(l.module_candidates("[vdso]").is_empty());
        assert!(l.module_candidates("./..").is_empty());
    }

    #[test]
    fn build_id_paths_follow_gdb_layout() {
        let l = Locator { debug_dirs: vec!["/d".into()], no_default_debug_dir: true, ..Default::default() };
        assert_eq!(l.build_id_candidates(&[0x93, 0xac, 0x61]), vec![PathBuf::from("/d/.build-id/93/ac61.debug")]);
    }

    #[test]
    fn debuglinks_with_separators_are_refused() {
        let l = Locator::default();
        assert!(l.debuglink_candidates(Path::new("/bin/x"), "../../etc/passwd").is_empty());
        assert_eq!(l.debuglink_candidates(Path::new("/bin/x"), "x.debug")[0], PathBuf::from("/bin/x.debug"));
    }
}
