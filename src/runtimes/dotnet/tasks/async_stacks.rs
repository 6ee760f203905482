//! Async stacks, as SOS's `dumpasync` synthesizes them: every task on the GC heap that has not
//! completed (collected by the heap walk itself, [`crate::runtimes::dotnet::gc::walk::Collected`]), chained by
//! their continuations (`Task.m_continuationObject`), from each task no other task continues to.
//!
//! An async method's task is an `AsyncTaskMethodBuilder<TResult>+AsyncStateMachineBox<TStateMachine>`:
//! its `StateMachine` field is the compiler's state machine (a struct inside the box, or, in Debug
//! builds, a class), whose `<>1__state` is the await it is paused at (-1 running, -2 done). A
//! continuation is followed as SOS does: a box is itself; a `List<object>` (several
//! continuations) is each of its items; a task continuation's `m_task`; an action's target
//! (`m_action`, then the delegate's `_target`, through a `ContinuationWrapper`). A stack whose
//! innermost frame is an async method paused at an await also names what it awaits: the
//! state machine's awaiter field (`<>u__N`) for that await.
//!
//! Stacks are printed innermost first, in address order of their innermost task (SOS walks the
//! heap by address); frames in SOS's order (a task's continuations are visited last-registered
//! first). Everything from the dump is bounded: stacks, frames per stack, continuations per list;
//! a continuation chain that comes back to a task already in the stack (a cycle, which a real
//! heap never has) is cut there.

use crate::runtimes::dotnet::contract::facts::Layout;
use crate::runtimes::dotnet::gc::names::sos_heap_name;
use crate::runtimes::dotnet::gc::referrers::{instance_fields, Field};
use crate::runtimes::dotnet::gc::walk::{self, WantedType};
use crate::runtimes::dotnet::types::metadata::Metadata;
use crate::runtimes::dotnet::types::objects::{self, TypeNamer};
use crate::runtimes::dotnet::{types::methoddesc, types::methodname, code::precode};
use crate::runtimes::dotnet::contract::target::Target;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Async stacks kept at most; more are counted.
pub(crate) const MAX_STACKS: usize = 4096;
/// Frames kept per stack at most.
pub(crate) const MAX_FRAMES: usize = 256;
/// Items of a continuation list followed at most.
pub(crate) const MAX_CONTINUATIONS: usize = 256;
/// Tasks examined at most (the walk bounds what it collects per segment too).
pub(crate) const MAX_TASKS: usize = 1 << 21;

/// `Task.TaskStateFlags`: RanToCompletion | Canceled | Faulted.
const COMPLETED_MASK: u32 = 0x160_0000;
const BOX_PREFIX: &str = "System.Runtime.CompilerServices.AsyncTaskMethodBuilder<";
const BOX_MARK: &str = "AsyncStateMachineBox";
const LIST_PREFIX: &str = "System.Collections.Generic.List<";
const CONTINUATION_WRAPPER: &str = "System.Runtime.CompilerServices.AsyncMethodBuilderCore+ContinuationWrapper";
/// Field element types that hold a reference (FieldDesc's CorElementType).
const REFERENCE_TYPES: [u32; 7] = [0x0e, 0x12, 0x1c, 0x1d, 0x14, 0x15, 0x13];
const VALUE_TYPE: u32 = 0x11;

/// One frame of an async stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AsyncFrame {
    pub(crate) address: u64,
    pub(crate) method_table: u64,
    /// As SOS prints it: a box's state machine type, else the object's type.
    pub(crate) type_name: String,
    /// What SOS prints in parentheses: the await state of a state machine (`0`), else the
    /// task's notable flags (`Started|DelegateInvoked`, a space when none), empty for an
    /// object that is no task.
    pub(crate) state: String,
    /// Continuation levels from the innermost frame (SOS's indentation).
    pub(crate) depth: u32,
    /// An async method's state machine (a box).
    pub(crate) is_state_machine: bool,
}

/// What the innermost async method awaits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Awaiting {
    pub(crate) type_name: String,
    /// The awaiter: an object, or the awaiter field inside the state machine.
    pub(crate) address: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AsyncStack {
    pub(crate) awaiting: Option<Awaiting>,
    /// Innermost first.
    pub(crate) frames: Vec<AsyncFrame>,
    /// Frames past [`MAX_FRAMES`] or a cycle cut this stack.
    pub(crate) cut: Option<String>,
}

/// The async stacks of one heap.
#[derive(Debug, Clone, Default)]
pub(crate) struct AsyncReading {
    pub(crate) stacks: Vec<AsyncStack>,
    /// Tasks not completed (the objects the stacks are made of).
    pub(crate) pending_tasks: usize,
    /// What was cut, for people to be told.
    pub(crate) cut: Vec<String>,
}

/// What one MethodTable is, for the chaining.
struct TypeInfo {
    name: String,
    is_box: bool,
    fields: Vec<Field>,
    /// A box's state machine MethodTable (its last type argument).
    state_machine_mt: Option<u64>,
    module: u64,
}

struct Builder<'a, 't, 'm> {
    t: &'a Target<'a>,
    namer: &'a TypeNamer<'t, 'm>,
    l: &'a Layout,
    task: WantedType,
    types: HashMap<u64, Rc<TypeInfo>>,
    metadata: HashMap<u64, Option<std::sync::Arc<Metadata>>>,
}

/// A task as SOS's `dumpasync` keeps it.
struct Node {
    address: u64,
    method_table: u64,
    info: Rc<TypeInfo>,
    flags: u32,
    /// The await state and where the state machine is (its fields' base, the MethodTable that
    /// names them, and whether the base is an object's start).
    state_machine: Option<(i32, StateMachineAt)>,
    continuations: Vec<u64>,
    top_level: bool,
}

#[derive(Clone, Copy)]
struct StateMachineAt {
    /// Where its fields' offsets count from (an object's MethodTable pointer, or the struct's
    /// start inside the box less 8, so that [`Field::offset`] applies to both).
    base: u64,
    method_table: u64,
}

/// The async stacks from the tasks the heap walk collected (`(address, MethodTable)`, address order).
pub(crate) fn read(t: &Target, namer: &TypeNamer, l: &Layout, task: WantedType, tasks: &[(u64, u64)]) -> AsyncReading {
    let mut b = Builder { t, namer, l, task, types: HashMap::new(), metadata: HashMap::new() };
    let mut out = AsyncReading::default();
    if tasks.len() > MAX_TASKS {
        out.cut.push(format!("{} tasks on the heap; the first {MAX_TASKS} were chained", tasks.len()));
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    for &(address, mt) in tasks.iter().take(MAX_TASKS) {
        let Ok(flags) = t.read_u32(address.wrapping_add(l.task_state_flags), "Task.m_stateFlags") else { continue };
        if flags & COMPLETED_MASK != 0 {
            continue;
        }
        let info = b.info(mt);
        let state_machine = if info.is_box { b.state_machine(address, &info) } else { None };
        let mut continuations = Vec::new();
        if let Ok(c) = t.read_ptr(address.wrapping_add(l.task_continuation_object), "Task.m_continuationObject")
            && b.valid(c)
        {
            let c = b.resolve(c);
            b.add_continuation(c, &mut continuations, &mut out.cut);
        }
        index.insert(address, nodes.len());
        nodes.push(Node { address, method_table: mt, info, flags, state_machine, continuations, top_level: true });
    }
    out.pending_tasks = nodes.len();
    for i in 0..nodes.len() {
        for c in nodes[i].continuations.clone() {
            if let Some(&j) = index.get(&c) {
                nodes[j].top_level = false;
            }
        }
    }
    let mut skipped = 0usize;
    for i in 0..nodes.len() {
        if !nodes[i].top_level || !has_state_machine(&nodes, &index, i) {
            continue;
        }
        if out.stacks.len() >= MAX_STACKS {
            skipped += 1;
            continue;
        }
        out.stacks.push(b.stack(&nodes, &index, i));
    }
    if skipped > 0 {
        out.cut.push(format!("{skipped} more async stacks past the first {MAX_STACKS}"));
    }
    out
}

/// SOS shows a stack only when some frame in it is an async method (without `--tasks`).
fn has_state_machine(nodes: &[Node], index: &HashMap<u64, usize>, top: usize) -> bool {
    let mut seen = HashSet::new();
    let mut todo = vec![top];
    while let Some(i) = todo.pop() {
        if !seen.insert(i) || seen.len() > MAX_FRAMES {
            continue;
        }
        if nodes[i].info.is_box {
            return true;
        }
        todo.extend(nodes[i].continuations.iter().filter_map(|c| index.get(c).copied()));
    }
    false
}

impl Builder<'_, '_, '_> {
    fn info(&mut self, mt: u64) -> Rc<TypeInfo> {
        if let Some(i) = self.types.get(&mt) {
            return i.clone();
        }
        let name = self.namer.type_name(mt).map(|n| sos_heap_name(&n)).unwrap_or_default();
        let is_box = name.starts_with(BOX_PREFIX) && name[BOX_PREFIX.len()..].contains(BOX_MARK);
        let fields = instance_fields(self.t, self.namer, self.l, mt);
        let state_machine_mt = if is_box { self.namer.class_instantiation(mt).ok().and_then(|a| a.last().copied()) } else { None };
        let module = self.t.field_ptr(mt, "MethodTable", "Module").unwrap_or(0);
        let info = Rc::new(TypeInfo { name, is_box, fields, state_machine_mt, module });
        self.types.insert(mt, info.clone());
        info
    }

    /// A non-null reference to something with a plausible MethodTable.
    fn valid(&self, v: u64) -> bool {
        v >= 0x10000 && v & 7 == 0 && objects::method_table(self.t, v).is_ok_and(|mt| objects::is_plausible_method_table(self.t, mt))
    }

    fn field<'i>(info: &'i TypeInfo, name: &str) -> Option<&'i Field> {
        info.fields.iter().find(|f| f.name == name)
    }

    /// The object in reference field `name` of the object at `at`, when valid.
    fn object_field(&mut self, at: u64, name: &str) -> Option<u64> {
        let mt = objects::method_table(self.t, at).ok()?;
        let info = self.info(mt);
        let f = Self::field(&info, name).filter(|f| REFERENCE_TYPES.contains(&f.element_type))?;
        let v = self.t.read_ptr(at.wrapping_add(f.offset), "object field").ok()?;
        self.valid(v).then_some(v)
    }

    fn is_task(&self, mt: u64) -> bool {
        walk::derives_from(self.t, mt, self.task)
    }

    /// SOS's `ResolveContinuation`: to the task or state machine a continuation object stands for.
    fn resolve(&mut self, c: u64) -> u64 {
        let Ok(mt) = objects::method_table(self.t, c) else { return c };
        let info = self.info(mt);
        if info.is_box && self.is_task(mt) {
            return c;
        }
        if let Some(task) = self.object_field(c, "m_task") {
            return task;
        }
        let mut c = c;
        if let Some(action) = self.object_field(c, "m_action") {
            c = action;
        }
        if let Some(target) = self.object_field(c, "_target") {
            c = target;
            let name = objects::method_table(self.t, c).map(|mt| self.info(mt).name.clone()).unwrap_or_default();
            if name == CONTINUATION_WRAPPER
                && let Some(inner) = self.object_field(c, "_continuation")
            {
                c = inner;
                if let Some(target) = self.object_field(c, "_target") {
                    c = target;
                }
            }
        }
        c
    }

    /// A continuation, or each item of a `List<object>` of them.
    fn add_continuation(&mut self, c: u64, out: &mut Vec<u64>, cut: &mut Vec<String>) {
        let Ok(mt) = objects::method_table(self.t, c) else { return };
        let info = self.info(mt);
        if !info.name.starts_with(LIST_PREFIX) {
            out.push(c);
            return;
        }
        let Some(items) = self.object_field(c, "_items") else { return };
        let Ok(len) = self.t.read_u32(items.wrapping_add(8), "array length") else { return };
        if len as usize > MAX_CONTINUATIONS {
            cut.push(format!("the continuation list {c:#x} has {len} slots; the first {MAX_CONTINUATIONS} were followed"));
        }
        for i in 0..(len as usize).min(MAX_CONTINUATIONS) {
            let Ok(v) = self.t.read_ptr(items + 16 + 8 * i as u64, "continuation list item") else { break };
            if self.valid(v) {
                let r = self.resolve(v);
                out.push(r);
            }
        }
    }

    /// A box's state machine: its await state and where its fields are.
    fn state_machine(&mut self, address: u64, info: &TypeInfo) -> Option<(i32, StateMachineAt)> {
        let f = Self::field(info, "StateMachine")?;
        let at = if f.element_type == VALUE_TYPE {
            // The struct's fields count from its start; Field offsets include the MethodTable
            // pointer of an object.
            StateMachineAt { base: address.wrapping_add(f.offset).wrapping_sub(8), method_table: info.state_machine_mt? }
        } else {
            let o = self.t.read_ptr(address.wrapping_add(f.offset), "AsyncStateMachineBox.StateMachine").ok()?;
            if !self.valid(o) {
                return None;
            }
            StateMachineAt { base: o, method_table: objects::method_table(self.t, o).ok()? }
        };
        let sm = self.info(at.method_table);
        let state = Self::field(&sm, "<>1__state")?;
        let v = self.t.read_u32(at.base.wrapping_add(state.offset), "<>1__state").ok()? as i32;
        Some((v, at))
    }

    /// One stack from the top-level task `top`, as SOS renders it.
    fn stack(&mut self, nodes: &[Node], index: &HashMap<u64, usize>, top: usize) -> AsyncStack {
        let n = &nodes[top];
        let awaiting = match n.state_machine {
            Some((state, at)) if state >= 0 && n.flags & COMPLETED_MASK == 0 => self.awaiting(state, at),
            _ => None,
        };
        let mut frames = Vec::new();
        let mut cut = None;
        let mut seen = HashSet::new();
        let mut todo = vec![(top, 0u32)];
        while let Some((i, depth)) = todo.pop() {
            if frames.len() >= MAX_FRAMES {
                cut = Some(format!("more than {MAX_FRAMES} frames"));
                break;
            }
            let n = &nodes[i];
            if !seen.insert(i) {
                cut = Some(format!("the continuations come back to {:#x} (a cycle)", n.address));
                continue;
            }
            let state = match n.state_machine {
                Some((s, _)) if n.info.is_box => s.to_string(),
                _ if n.info.is_box => "0".into(),
                _ => describe_flags(n.flags),
            };
            let info = n.info.clone();
            frames.push(AsyncFrame { address: n.address, method_table: n.method_table, type_name: self.description(n.address, &info), state, depth, is_state_machine: n.info.is_box });
            for &c in &n.continuations {
                match index.get(&c) {
                    Some(&j) => todo.push((j, depth + 1)),
                    None => {
                        if frames.len() >= MAX_FRAMES {
                            break;
                        }
                        let mt = objects::method_table(self.t, c).unwrap_or(0);
                        let info = self.info(mt);
                        let state = match Self::field(&info, "m_stateFlags") {
                            Some(f) => self.t.read_u32(c.wrapping_add(f.offset), "Task.m_stateFlags").map(describe_flags).unwrap_or_default(),
                            None => String::new(),
                        };
                        frames.push(AsyncFrame { address: c, method_table: mt, type_name: self.description(c, &info), state, depth: depth + 1, is_state_machine: false });
                    }
                }
            }
        }
        AsyncStack { awaiting, frames, cut }
    }

    /// A frame as SOS describes it: a box's state machine type; an object with a delegate in
    /// `m_action` (a `ContinuationTaskFromTask`, a `Task.Run`'s task) its type and the delegate's
    /// method, `Type {Namespace.Type.Method(Args)}`, when the method is found.
    fn description(&mut self, address: u64, info: &TypeInfo) -> String {
        let d = describe(info);
        if info.is_box {
            return d;
        }
        match self.delegate_method(address) {
            Some(m) => format!("{d} {{{m}}}"),
            None => d,
        }
    }

    /// The method of the delegate in `m_action` of the object at `at`: its `_methodPtr`, else its
    /// `_methodPtrAux`, through the precode it points at (SOS reads no method when `_methodPtr`
    /// is null).
    fn delegate_method(&mut self, at: u64) -> Option<String> {
        let action = self.object_field(at, "m_action")?;
        let info = self.info(objects::method_table(self.t, action).ok()?);
        let ptr = |name: &str| -> u64 { Self::field(&info, name).and_then(|f| self.t.read_ptr(action.wrapping_add(f.offset), name).ok()).unwrap_or(0) };
        let (first, aux) = (ptr("_methodPtr"), ptr("_methodPtrAux"));
        if first == 0 {
            return None;
        }
        let md = [first, aux].into_iter().filter(|&p| p != 0).find_map(|p| precode::method_desc(self.t, p).ok().flatten())?;
        let md = methoddesc::read(self.t, md).ok()?;
        let name = methodname::name(self.t, self.namer, &md).ok()?;
        Some(format!("{}{}", name.qualified, name.signature.unwrap_or_default()))
    }

    /// SOS's guess at the awaiter of await `state`: `<>u__1` when the state is 0 or there is one
    /// awaiter field, else the first awaiter field that is set.
    fn awaiting(&mut self, state: i32, at: StateMachineAt) -> Option<Awaiting> {
        let sm = self.info(at.method_table);
        let awaiters: Vec<&Field> = sm.fields.iter().filter(|f| f.name.starts_with("<>u__")).collect();
        if state == 0 || awaiters.len() == 1 {
            let f = Self::field(&sm, "<>u__1")?;
            return self.awaiter(&sm, at, f);
        }
        for f in &awaiters {
            if REFERENCE_TYPES.contains(&f.element_type) {
                let v = self.t.read_ptr(at.base.wrapping_add(f.offset), "awaiter field").ok()?;
                if v != 0 {
                    return self.awaiter(&sm, at, f);
                }
            } else {
                // The awaiter's bytes: up to the next field or the end of the state machine.
                let end = sm.fields.iter().map(|g| g.offset).filter(|&o| o > f.offset).min().unwrap_or(f.offset + 8);
                let len = usize::try_from(end - f.offset).ok()?.min(256);
                let bytes = self.t.read_bytes(at.base.wrapping_add(f.offset), len, "awaiter field").ok()?;
                if bytes.iter().any(|&b| b != 0) {
                    return self.awaiter(&sm, at, f);
                }
            }
        }
        None
    }

    fn awaiter(&mut self, sm: &TypeInfo, at: StateMachineAt, f: &Field) -> Option<Awaiting> {
        let address = at.base.wrapping_add(f.offset);
        if REFERENCE_TYPES.contains(&f.element_type) {
            let v = self.t.read_ptr(address, "awaiter field").ok()?;
            if !self.valid(v) {
                return None;
            }
            let mt = objects::method_table(self.t, v).ok()?;
            return Some(Awaiting { type_name: self.info(mt).name.clone(), address: v });
        }
        let name = self.field_type_name(sm, at.method_table, f)?;
        Some(Awaiting { type_name: name, address })
    }

    /// A value-type field's type as SOS names it, from the field's signature.
    fn field_type_name(&mut self, sm: &TypeInfo, sm_mt: u64, f: &Field) -> Option<String> {
        let module = if f.module != 0 { f.module } else { sm.module };
        let md = self.metadata.entry(module).or_insert_with(|| self.namer.module_metadata(module).ok()).clone()?;
        let sig = md.field_signature(self.namer.image(), f.rid).ok()?;
        if sig.first() != Some(&0x06) {
            return None;
        }
        let inst = self.namer.class_instantiation(sm_mt).unwrap_or_default();
        let mut r = SigReader { bytes: &sig, pos: 1 };
        let dac = sig_type(self.namer, &md, &inst, &mut r, 0)?;
        Some(sos_heap_name(&dac))
    }
}

/// The name SOS gives a frame: a box's state machine type, else the object's type.
fn describe(info: &TypeInfo) -> String {
    if info.is_box
        && let Some(pos) = info.name.find("StateMachineBox<")
    {
        let rest = &info.name[pos + "StateMachineBox<".len()..];
        return rest.strip_suffix('>').unwrap_or(rest).to_string();
    }
    info.name.clone()
}

/// The task flags SOS shows (`Started|DelegateInvoked`); a space when none of them is set.
pub(crate) fn describe_flags(flags: u32) -> String {
    const NAMES: [(u32, &str); 10] = [
        (0x1_0000, "Started"),
        (0x2_0000, "DelegateInvoked"),
        (0x4_0000, "Disposed"),
        (0x8_0000, "ExceptionObservedByParent"),
        (0x10_0000, "CancellationAcknowledged"),
        (0x20_0000, "Faulted"),
        (0x40_0000, "Canceled"),
        (0x80_0000, "WaitingOnChildren"),
        (0x100_0000, "RanToCompletion"),
        (0x400_0000, "CompletionReserved"),
    ];
    let set: Vec<&str> = NAMES.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, n)| *n).collect();
    if set.is_empty() { " ".into() } else { set.join("|") }
}

struct SigReader<'b> {
    bytes: &'b [u8],
    pos: usize,
}

impl SigReader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    fn compressed(&mut self) -> Option<u32> {
        let b = self.byte()? as u32;
        if b & 0x80 == 0 {
            Some(b)
        } else if b & 0xc0 == 0x80 {
            Some(((b & 0x3f) << 8) | self.byte()? as u32)
        } else if b & 0xe0 == 0xc0 {
            let (x, y, z) = (self.byte()? as u32, self.byte()? as u32, self.byte()? as u32);
            Some(((b & 0x1f) << 24) | (x << 16) | (y << 8) | z)
        } else {
            None
        }
    }
}

const MAX_SIG_DEPTH: u32 = 8;

/// A signature type as the runtime names types (``Outer`1+Inner[[Arg]]``), for [`sos_heap_name`].
fn sig_type(namer: &TypeNamer, md: &Metadata, inst: &[u64], r: &mut SigReader, depth: u32) -> Option<String> {
    if depth > MAX_SIG_DEPTH {
        return None;
    }
    let e = r.byte()?;
    let primitive = match e {
        0x02 => "System.Boolean",
        0x03 => "System.Char",
        0x04 => "System.SByte",
        0x05 => "System.Byte",
        0x06 => "System.Int16",
        0x07 => "System.UInt16",
        0x08 => "System.Int32",
        0x09 => "System.UInt32",
        0x0a => "System.Int64",
        0x0b => "System.UInt64",
        0x0c => "System.Single",
        0x0d => "System.Double",
        0x0e => "System.String",
        0x18 => "System.IntPtr",
        0x19 => "System.UIntPtr",
        0x1c => "System.Object",
        _ => "",
    };
    if !primitive.is_empty() {
        return Some(primitive.to_string());
    }
    match e {
        0x11 | 0x12 => {
            let coded = r.compressed()?;
            type_def_or_ref_name(namer, md, coded)
        }
        0x13 => {
            let n = r.compressed()? as usize;
            namer.type_name(*inst.get(n)?).ok()
        }
        0x15 => {
            let generic = sig_type(namer, md, inst, r, depth + 1)?;
            let n = r.compressed()?;
            if n > 16 {
                return None;
            }
            let args = (0..n).map(|_| sig_type(namer, md, inst, r, depth + 1).map(|a| format!("[{a}]"))).collect::<Option<Vec<_>>>()?;
            Some(format!("{generic}[{}]", args.join(",")))
        }
        0x1d => Some(format!("{}[]", sig_type(namer, md, inst, r, depth + 1)?)),
        _ => None,
    }
}

/// A TypeDef's or TypeRef's full name (`Namespace.Outer+Inner`).
fn type_def_or_ref_name(namer: &TypeNamer, md: &Metadata, coded: u32) -> Option<String> {
    let rid = coded >> 2;
    let image = namer.image();
    match coded & 3 {
        0 => md.type_def_full_name(image, rid).ok(),
        1 => {
            let mut parts = Vec::new();
            let mut cur = rid;
            for _ in 0..16 {
                let (ns, name) = md.type_ref_name(image, cur).ok()?;
                match md.type_ref_enclosing(image, cur).ok()? {
                    Some(outer) if outer != cur => {
                        parts.push(name);
                        cur = outer;
                    }
                    _ => {
                        parts.push(if ns.is_empty() { name } else { format!("{ns}.{name}") });
                        parts.reverse();
                        return Some(parts.join("+"));
                    }
                }
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_read_as_sos_prints_them() {
        assert_eq!(describe_flags(0x0200_0000), " ");
        assert_eq!(describe_flags(0x0003_0000), "Started|DelegateInvoked");
        assert_eq!(describe_flags(0x0500_0000), "RanToCompletion|CompletionReserved");
    }

    #[test]
    fn a_box_is_named_by_its_state_machine() {
        let info = TypeInfo {
            name: "System.Runtime.CompilerServices.AsyncTaskMethodBuilder<System.Int32>+AsyncStateMachineBox<A.Program+<F>d__5>".into(),
            is_box: true,
            fields: Vec::new(),
            state_machine_mt: None,
            module: 0,
        };
        assert_eq!(describe(&info), "A.Program+<F>d__5");
    }
}
