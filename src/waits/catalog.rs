//! The lock families knot recognises, read from the data files in `analyzers/` (compiled in).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The engine's reader for a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Kind {
    Mutex,
    Rwlock,
    Cond,
    Sem,
    Join,
    /// A barrier: its waiters wait for the rest of its parties to arrive.
    Barrier,
    /// A bare futex word with no owner field (glibc internal locks, Rust std locks).
    FutexWord,
    /// A thread parked until another unparks it (`std::thread::park`): a wait, but on no lock.
    Park,
    /// CPython's `threading.Lock`/`RLock`: an interpreter object over a semaphore.
    PythonLock,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        self.lock_kind().as_str()
    }

    /// The kind of the locks this family's waiters wait on.
    pub(crate) fn lock_kind(self) -> super::LockKind {
        use super::LockKind;
        match self {
            Kind::Mutex => LockKind::Mutex,
            Kind::Rwlock => LockKind::Rwlock,
            Kind::Cond => LockKind::Cond,
            Kind::Sem => LockKind::Sem,
            // A Python Lock or RLock excludes as a mutex does.
            Kind::PythonLock => LockKind::Mutex,
            Kind::Join => LockKind::Join,
            Kind::Barrier => LockKind::Barrier,
            // A park makes no lock (`waits::analyze` says it as the thread's state).
            Kind::FutexWord | Kind::Park => LockKind::Futex,
        }
    }
}

// A file's `[library]` table (name, module, min_version) says for people which library and
// versions its layouts are for; the engine does not read it.
#[derive(Debug, Deserialize)]
struct FileData {
    family: Vec<FamilyData>,
    layout: BTreeMap<String, BTreeMap<String, u64>>,
}

#[derive(Debug, Deserialize)]
struct FamilyData {
    kind: Kind,
    entry: Vec<String>,
    futex_offsets: Vec<u64>,
    layout: String,
    label: Option<String>,
    #[serde(default)]
    infer_owner: bool,
    /// The family whose waits this one's are made of (CPython's locks wait in a semaphore).
    wraps: Option<Kind>,
}

/// A structure layout: field name → byte offset, and `size`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    pub(crate) name: String,
    fields: BTreeMap<String, u64>,
}

impl Layout {
    /// The layout's size.
    pub(crate) fn size(&self) -> u64 {
        self.fields.get("size").copied().unwrap_or(0)
    }

    /// A field's offset; the data files are checked by a test to have every field the engine reads.
    pub(crate) fn offset(&self, field: &str) -> Option<u64> {
        self.fields.get(field).copied()
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Family {
    pub(crate) kind: Kind,
    pub(crate) entry: Vec<String>,
    pub(crate) futex_offsets: Vec<u64>,
    pub(crate) layout: Layout,
    /// How the report names a lock of this family, when it is not a plain pthread type.
    pub(crate) label: String,
    pub(crate) infer_owner: bool,
    /// A thread inside this family's entry and, further in, in one of `wraps`' waits for this
    /// family's lock (a CPython lock's semaphore): it is this family's.
    pub(crate) wraps: Option<Kind>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) families: Vec<Family>,
    /// Every layout of the data files by name, those no family names too (a thread's own
    /// `struct pthread`).
    pub(crate) layouts: BTreeMap<String, Layout>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum CatalogError {
    #[error("analyzer data {file}: {reason}")]
    Invalid { file: &'static str, reason: String },
}

const FILES: &[(&str, &str)] = &[
    ("analyzers/glibc.toml", include_str!("../../analyzers/glibc.toml")),
    ("analyzers/rust-std.toml", include_str!("../../analyzers/rust-std.toml")),
    ("analyzers/cpython.toml", include_str!("../../analyzers/cpython.toml")),
];

impl Catalog {
    #[cfg(test)]
    pub(crate) fn parse(file: &'static str, text: &str) -> Result<Vec<Family>, CatalogError> {
        Ok(Self::parse_file(file, text)?.0)
    }

    /// A data file's families and all its layouts.
    fn parse_file(file: &'static str, text: &str) -> Result<(Vec<Family>, Vec<Layout>), CatalogError> {
        let bad = |reason: String| CatalogError::Invalid { file, reason };
        let data: FileData = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let layouts = data.layout.iter().map(|(name, fields)| Layout { name: name.clone(), fields: fields.clone() }).collect();
        let families = data
            .family
            .into_iter()
            .map(|f| {
                let fields = data.layout.get(&f.layout).ok_or_else(|| bad(format!("layout {} is not defined", f.layout)))?;
                if f.futex_offsets.is_empty() || f.entry.is_empty() {
                    return Err(bad(format!("family {:?} needs entry functions and futex offsets", f.kind)));
                }
                Ok(Family {
                    kind: f.kind,
                    entry: f.entry,
                    futex_offsets: f.futex_offsets,
                    layout: Layout { name: f.layout.clone(), fields: fields.clone() },
                    label: f.label.unwrap_or_else(|| format!("pthread {}", f.kind.as_str())),
                    infer_owner: f.infer_owner,
                    wraps: f.wraps,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((families, layouts))
    }

    /// The layout called `name` in the data files.
    pub(crate) fn layout(&self, name: &str) -> Option<&Layout> {
        self.layouts.get(name)
    }

    /// The families in `analyzers/`, parsed once.
    pub(crate) fn builtin() -> Result<&'static Catalog, &'static CatalogError> {
        static CATALOG: OnceLock<Result<Catalog, CatalogError>> = OnceLock::new();
        CATALOG
            .get_or_init(|| {
                let mut families = Vec::new();
                let mut layouts = BTreeMap::new();
                for (file, text) in FILES {
                    let (f, l) = Catalog::parse_file(file, text)?;
                    families.extend(f);
                    layouts.extend(l.into_iter().map(|l| (l.name.clone(), l)));
                }
                Ok(Catalog { families, layouts })
            })
            .as_ref()
    }

    /// The family a blocked thread is in, from its innermost `depth` frames (innermost first),
    /// with the index of the frame that matched. A lock type's own entry (a pthread mutex) wins
    /// over a bare futex word met further in (its `__lll_lock_wait`): the innermost typed match,
    /// else the innermost bare one. A family made of another's waits (a CPython lock over a
    /// semaphore: `wraps`) wins over that one when its entry is further out.
    pub(crate) fn recognise<'a, I: IntoIterator<Item = &'a str>>(&self, functions: I, depth: usize) -> Option<(&Family, usize)> {
        let names: Vec<_> = functions.into_iter().take(depth).map(strip_generics).collect();
        let family_of = |name: &str| self.families.iter().find(|f| f.entry.iter().any(|e| *e == name));
        let mut bare = None;
        for (i, name) in names.iter().enumerate() {
            if let Some(f) = family_of(name.as_ref()) {
                if f.kind != Kind::FutexWord {
                    let wrapper = names.iter().enumerate().skip(i + 1).find_map(|(j, n)| family_of(n.as_ref()).filter(|w| w.wraps == Some(f.kind)).map(|w| (w, j)));
                    return Some(wrapper.unwrap_or((f, i)));
                }
                bare.get_or_insert((f, i));
            }
        }
        bare
    }
}

/// `Mutex<T>::lock_contended` → `Mutex::lock_contended`: entries are written without generics.
fn strip_generics(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.contains('<') {
        return name.into();
    }
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_data_parses_and_has_the_fields_the_engine_reads() {
        let catalog = Catalog::builtin().unwrap();
        let needs: &[(Kind, &[&str])] = &[
            (Kind::Mutex, &["lock", "count", "owner", "kind"]),
            (Kind::Rwlock, &["readers", "cur_writer", "shared", "flags"]),
            (Kind::Cond, &["wrefs"]),
            (Kind::Sem, &["value", "nwaiters"]),
            (Kind::Barrier, &["in", "current_round", "count"]),
        ];
        for (kind, fields) in needs {
            let f = catalog.families.iter().find(|f| f.kind == *kind).unwrap();
            for field in *fields {
                assert!(f.layout.offset(field).is_some(), "{kind:?} layout lacks {field}");
            }
            assert!(f.layout.size() > 0);
        }
    }

    #[test]
    fn the_innermost_entry_decides() {
        let c = Catalog::builtin().unwrap();
        let mutex = ["futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized", "___pthread_mutex_lock", "worker"];
        let (f, i) = c.recognise(mutex.iter().copied(), 12).unwrap();
        assert_eq!((f.kind, i), (Kind::Mutex, 2));
        let internal = ["futex_wait", "__GI___lll_lock_wait_private", "_IO_flockfile", "puts"];
        assert_eq!(c.recognise(internal.iter().copied(), 12).unwrap().0.kind, Kind::FutexWord);
        let rust = ["syscall", "std::sys::pal::unix::futex::futex_wait", "std::sys::sync::mutex::futex::Mutex::lock_contended"];
        assert_eq!(c.recognise(rust.iter().copied(), 12).unwrap().0.label, "Rust std::sync::Mutex");
        assert!(c.recognise(["nanosleep", "main"].iter().copied(), 12).is_none());
        let python = ["__futex_abstimed_wait_common", "__GI___futex_abstimed_wait_cancelable64", "do_futex_wait", "__new_sem_wait_slow64", "__new_sem_wait", "PyThread_acquire_lock_timed", "acquire_timed"];
        let (f, i) = c.recognise(python.iter().copied(), 12).unwrap();
        assert_eq!((f.kind, i), (Kind::PythonLock, 5), "a semaphore under a CPython lock is the lock");
        let sem = ["__futex_abstimed_wait_common", "do_futex_wait", "__new_sem_wait_slow64", "__new_sem_wait", "consume"];
        assert_eq!(c.recognise(sem.iter().copied(), 12).unwrap().0.kind, Kind::Sem, "a plain semaphore stays one");
        let park = ["syscall", "std::sys::pal::unix::futex::futex_wait", "std::sys::sync::thread_parking::futex::Parker::park", "std::thread::functions::park"];
        assert_eq!(c.recognise(park.iter().copied(), 12).unwrap().0.kind, Kind::Park);
        for layout in ["struct_pthread_x86_64", "struct_pthread_aarch64"] {
            assert!(c.layout(layout).and_then(|l| l.offset("tid")).is_some(), "{layout} has the thread's tid");
        }
    }

    #[test]
    fn malformed_data_is_an_error_naming_the_file() {
        let err = Catalog::parse("x.toml", "[library]\nname='a'\nmodule=''\nmin_version='1'\n[[family]]\nkind='mutex'\nentry=['f']\nfutex_offsets=[0]\nlayout='nope'\n[layout]\n").unwrap_err();
        assert!(err.to_string().contains("x.toml") && err.to_string().contains("nope"));
    }
}
