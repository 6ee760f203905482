//! What a thread is for, in the service's own words: Orleans' message receive loop, a grain
//! activation, Kestrel's request loop, a thread-pool worker, the runtime's finalizer. Read from
//! the thread's frames, its name and what the runtime marks it as, by the rules in
//! `analyzers/roles.toml` (data, compiled in), the first rule that matches.

use crate::crash::machinery::normalize;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

const FILE: &str = "analyzers/roles.toml";
const TEXT: &str = include_str!("../analyzers/roles.toml");

/// A thread's role (`threads[].role`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ThreadRole {
    /// The framework the role belongs to: `orleans`, `aspnetcore`, `dotnet`.
    pub framework: String,
    /// A stable key for programs: `grain_activation`, `message_receive`, `request_loop`, ….
    pub role: String,
    /// The role for people: `grain activation`, `message receive loop`.
    pub name: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleRule {
    framework: String,
    role: String,
    name: String,
    plural: String,
    frames: Vec<String>,
    prefixes: Vec<String>,
    /// Thread names (managed `Thread.Name`, or the OS name where the dump records it).
    #[serde(default)]
    names: Vec<String>,
    /// What the runtime's own structures mark the thread as ([`RuntimeMark`]'s keys).
    #[serde(default)]
    marks: Vec<String>,
}

/// What the runtime's own structures say a thread is, whatever its frames and name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuntimeMark {
    /// The thread in `g_pFinalizerThread` (SOS clrthreads' "(Finalizer)").
    Finalizer,
    /// `TS_TPWorkerThread` in `Thread::m_State` (clrthreads' "(Threadpool Worker)").
    ThreadPoolWorker,
}

impl RuntimeMark {
    const ALL: [RuntimeMark; 2] = [RuntimeMark::Finalizer, RuntimeMark::ThreadPoolWorker];

    /// Its key in `analyzers/roles.toml`.
    pub(crate) fn key(self) -> &'static str {
        match self {
            RuntimeMark::Finalizer => "finalizer",
            RuntimeMark::ThreadPoolWorker => "threadpool_worker",
        }
    }
}

/// What a thread's role is read from.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RoleInputs<'a> {
    /// Its frames' function names, innermost first.
    pub functions: &'a [&'a str],
    pub name: Option<&'a str>,
    pub marks: &'a [RuntimeMark],
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Framework {
    name: String,
    /// The runtime's own threads (the thread pool, timers): not the service's words.
    #[serde(default)]
    runtime: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Roles {
    /// Framework key → what it is called.
    framework: BTreeMap<String, Framework>,
    role: Vec<RoleRule>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RolesError {
    #[error("analyzer data {FILE}: {0}")]
    Parse(String),
    #[error("analyzer data {FILE}: role {role} names framework {framework}, which [framework] does not list")]
    UnknownFramework { role: String, framework: String },
    #[error("analyzer data {FILE}: role {0} has no frames, prefixes, names or marks")]
    Empty(String),
    #[error("analyzer data {FILE}: role {role} names mark {mark}, which is none of the runtime's")]
    UnknownMark { role: String, mark: String },
}

impl Roles {
    /// The built-in rules, parsed and checked once.
    pub(crate) fn builtin() -> Result<&'static Roles, &'static RolesError> {
        static DATA: OnceLock<Result<Roles, RolesError>> = OnceLock::new();
        DATA.get_or_init(|| Roles::parse(TEXT)).as_ref()
    }

    fn parse(text: &str) -> Result<Roles, RolesError> {
        let roles: Roles = toml::from_str(text).map_err(|e| RolesError::Parse(e.to_string()))?;
        for r in &roles.role {
            if !roles.framework.contains_key(&r.framework) {
                return Err(RolesError::UnknownFramework { role: r.role.clone(), framework: r.framework.clone() });
            }
            if r.frames.is_empty() && r.prefixes.is_empty() && r.names.is_empty() && r.marks.is_empty() {
                return Err(RolesError::Empty(r.role.clone()));
            }
            if let Some(m) = r.marks.iter().find(|m| !RuntimeMark::ALL.iter().any(|k| k.key() == m.as_str())) {
                return Err(RolesError::UnknownMark { role: r.role.clone(), mark: m.clone() });
            }
        }
        Ok(roles)
    }

    /// The role of a thread: the first rule one of whose frames, names or marks it has.
    pub(crate) fn role_of(&self, thread: RoleInputs<'_>) -> Option<ThreadRole> {
        let functions: Vec<String> = thread.functions.iter().map(|f| normalize(f)).collect();
        let rule = self.role.iter().find(|r| {
            functions.iter().any(|n| r.frames.iter().any(|f| f == n) || r.prefixes.iter().any(|p| n.starts_with(p.as_str())))
                || thread.name.is_some_and(|n| r.names.iter().any(|x| x == n))
                || thread.marks.iter().any(|m| r.marks.iter().any(|x| x == m.key()))
        })?;
        Some(ThreadRole { framework: rule.framework.clone(), role: rule.role.clone(), name: rule.name.clone() })
    }

    /// The framework's name for people (`Orleans`).
    pub(crate) fn framework_name(&self, key: &str) -> Option<&str> {
        self.framework.get(key).map(|f| f.name.as_str())
    }

    /// A service framework's role (not the runtime's own threads).
    pub(crate) fn is_service(&self, role: &ThreadRole) -> bool {
        self.framework.get(&role.framework).is_some_and(|f| !f.runtime)
    }

    /// The role's name for several threads (`grain activations`).
    pub(crate) fn plural(&self, role: &ThreadRole) -> Option<&str> {
        self.role.iter().find(|r| r.framework == role.framework && r.role == role.role).map(|r| r.plural.as_str())
    }
}

#[cfg(test)]
/// The role of a thread with these frames (innermost first), by the built-in rules (none when
/// the data is bad: its unit test fails first).
pub(crate) fn role_of<'a>(functions: impl Iterator<Item = &'a str>) -> Option<ThreadRole> {
    let functions: Vec<&str> = functions.collect();
    role_of_thread(RoleInputs { functions: &functions, ..RoleInputs::default() })
}

/// The role of a thread with these frames, name and runtime marks, by the built-in rules.
pub(crate) fn role_of_thread(thread: RoleInputs<'_>) -> Option<ThreadRole> {
    Roles::builtin().ok()?.role_of(thread)
}

#[cfg(test)]
mod sample_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_rules_parse_and_name_only_listed_frameworks() {
        let roles = Roles::builtin().unwrap_or_else(|e| panic!("{e}"));
        assert!(roles.role.len() >= 10);
        for r in &roles.role {
            assert!(roles.framework_name(&r.framework).is_some(), "{}", r.role);
        }
        assert!(matches!(Roles::parse("[framework]\n[[role]]\nframework = \"x\"\nrole = \"r\"\nname = \"n\"\nplural = \"p\"\nframes = [\"f\"]\nprefixes = []\n"), Err(RolesError::UnknownFramework { .. })));
        assert!(matches!(Roles::parse("[framework.x]\nname = \"X\"\n[[role]]\nframework = \"x\"\nrole = \"r\"\nname = \"n\"\nplural = \"p\"\nframes = []\nprefixes = []\n"), Err(RolesError::Empty(_))));
        assert!(matches!(Roles::parse("[framework.x]\nname = \"X\"\nbogus = 1\n"), Err(RolesError::Parse(_))));
        assert!(matches!(
            Roles::parse("[framework.x]\nname = \"X\"\n[[role]]\nframework = \"x\"\nrole = \"r\"\nname = \"n\"\nplural = \"p\"\nframes = []\nprefixes = []\nmarks = [\"gc\"]\n"),
            Err(RolesError::UnknownMark { .. })
        ));
    }

    #[test]
    fn the_first_rule_that_matches_decides() {
        // An activation runs on a scheduler work item on a thread-pool worker: it is an activation.
        let activation = [
            "System.Threading.Monitor.Enter_Slowpath(System.Object)",
            "Orleans.Runtime.DefaultGrainActivator.CreateInstance",
            "Orleans.Runtime.ActivationData.Start",
            "Orleans.Runtime.Scheduler.WorkItemGroup.Execute",
            "System.Threading.PortableThreadPool+WorkerThread.WorkerThreadStart",
        ];
        let r = role_of(activation.iter().copied()).expect("a role");
        assert_eq!((r.framework.as_str(), r.role.as_str(), r.name.as_str()), ("orleans", "grain_activation", "grain activation"));
        let call = ["Orleans.Runtime.ActivationData+<RunMessageLoop>d__149.MoveNext", "Orleans.Runtime.Scheduler.WorkItemGroup.Execute"];
        assert_eq!(role_of(call.iter().copied()).map(|r| r.role), Some("grain_call".into()));
        let idle = ["System.Threading.LowLevelLifoSemaphore.WaitForSignal", "System.Threading.PortableThreadPool+WorkerThread.WorkerThreadStart"];
        assert_eq!(role_of(idle.iter().copied()).map(|r| r.role), Some("thread_pool_worker".into()));
        assert_eq!(role_of(["main", "__libc_start_call_main"].iter().copied()), None);
    }

    #[test]
    fn names_and_marks_give_the_runtime_threads_their_roles() {
        let native = ["__GI___libc_read"];
        let role = |name: Option<&str>, marks: &[RuntimeMark]| role_of_thread(RoleInputs { functions: &native, name, marks }).map(|r| r.role);
        assert_eq!(role(Some(".NET SigHandler"), &[]), Some("signal_handler".into()));
        assert_eq!(role(Some(".NET Tiered Com"), &[]), Some("tiered_compilation".into()));
        assert_eq!(role(None, &[RuntimeMark::Finalizer]), Some("finalizer".into()));
        assert_eq!(role(None, &[RuntimeMark::ThreadPoolWorker]), Some("thread_pool_worker".into()));
        assert_eq!(role(Some("LedgerWorker"), &[]), None);
        // Frames of an earlier rule win over a later rule's mark: a worker in a grain activation.
        let activation = ["Orleans.Runtime.ActivationData.Start"];
        let r = role_of_thread(RoleInputs { functions: &activation, name: Some(".NET TP Worker"), marks: &[RuntimeMark::ThreadPoolWorker] });
        assert_eq!(r.map(|r| r.role), Some("grain_activation".into()));
    }
}
