//! The wait-for graph as SVG, for the HTML report: threads and locks as boxes, "waits for"
//! (thread → lock) and "held by" (lock → owner) arrows, every cycle in red.
//!
//! Only the model's facts are drawn: a thread's `blocked_on`, a lock's `owner`, the report's
//! `deadlocks` (the cycles, found once by the graph, not again here); the words are
//! `report::words`'s. The layout is our own and needs no graphviz. Each thread waits for at most one
//! lock and each lock has at most one owner, so every node has at most one outgoing edge: each
//! connected part is a tree leading to one sink (a thread that waits for nothing, or a lock
//! whose owner is not a thread we have) or to one cycle. Nodes sit in columns by their distance
//! from that sink or cycle — waiters on the left, owners on the right — and in rows as a tidy
//! tree, so edges only join neighbouring columns and never cross. A cycle stands in the rightmost
//! column, top to bottom in cycle order, closed by an arc on its right.

use super::html::escape;
use super::model::Report;
use super::words::{edge_words, lock_name, owner_words, pool_edge_words, pool_node_words, referrer, state_words};
use crate::waits::Owner;
use std::collections::HashMap;
use std::fmt::Write;

const NODE_W: f64 = 210.0;
const NODE_H: f64 = 44.0;
const COL_GAP: f64 = 96.0;
const ROW_H: f64 = 60.0;
const PAD: f64 = 16.0;
/// Room on the right for the arc that closes a cycle.
const ARC_ROOM: f64 = 120.0;
/// Extra rows between the nodes of a cycle, for its arrows and their words.
const RING_GAP: f64 = 0.5;
/// At most this many nodes are drawn; cycles always are, then the largest parts.
const MAX_NODES: usize = 300;
/// Characters that fit on a node's first (bold) and second line.
const LINE1_CHARS: usize = 26;
const LINE2_CHARS: usize = 30;

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Thread(u32),
    /// Waiters with identical stacks that wait for the same lock and hold none: one box.
    Threads(Vec<u32>),
    /// An owner the dump has no thread for (it exited holding the lock).
    Exited(u32),
    Lock(usize),
    /// The thread pool of a cycle through it (`deadlocks[i].thread_pool`).
    Pool(usize),
}

struct Node {
    kind: Kind,
    out: Option<usize>,
    /// The edge to `out` rests on an inferred owner.
    out_inferred: bool,
    cycle: bool,
    out_cycle: bool,
}

/// The graph drawn, or `None` when no thread waits for a lock.
pub(crate) fn wait_for_graph(report: &Report) -> Option<String> {
    if report.locks.is_empty() {
        return None;
    }
    let g = build(report);
    Some(draw(report, &g))
}

struct Graph {
    nodes: Vec<Node>,
    /// Components to draw, in order; each is its nodes and whether it closes on a ring.
    parts: Vec<Part>,
    left_out: usize,
    left_out_nodes: usize,
}

struct Part {
    /// The ring's nodes in cycle order (empty for a tree).
    ring: Vec<usize>,
    /// The sink, for a tree.
    root: Option<usize>,
    size: usize,
}

fn build(report: &Report) -> Graph {
    let mut nodes: Vec<Node> = Vec::new();
    let new = |nodes: &mut Vec<Node>, kind| {
        nodes.push(Node { kind, out: None, out_inferred: false, cycle: false, out_cycle: false });
        nodes.len() - 1
    };
    let lock_index: HashMap<&str, usize> = report.locks.iter().enumerate().map(|(i, l)| (l.id.as_str(), i)).collect();
    let lock_node: Vec<usize> = (0..report.locks.len()).map(|i| new(&mut nodes, Kind::Lock(i))).collect();
    let group_of: HashMap<u32, usize> = report.groups.iter().enumerate().flat_map(|(g, gr)| gr.tids.iter().map(move |&t| (t, g))).collect();
    let owners: std::collections::HashSet<u32> = report.locks.iter().filter_map(|l| l.owner.tid()).collect();
    let in_cycle: std::collections::HashSet<u32> = report.deadlocks.iter().flat_map(|d| d.tids.iter().copied()).collect();

    // Threads: one box each, except waiters that hold nothing, which share a box with the
    // threads of the same stack waiting for the same lock.
    let mut thread_node: HashMap<u32, usize> = HashMap::new();
    let mut shared: HashMap<(usize, usize), Vec<u32>> = HashMap::new();
    let mut shared_order: Vec<(usize, usize)> = Vec::new();
    for t in &report.threads {
        let Some(&li) = t.blocked_on.as_deref().and_then(|id| lock_index.get(id)) else { continue };
        if !owners.contains(&t.tid) && !in_cycle.contains(&t.tid) && let Some(&g) = group_of.get(&t.tid) {
            let key = (li, g);
            if !shared.contains_key(&key) {
                shared_order.push(key);
            }
            shared.entry(key).or_default().push(t.tid);
            continue;
        }
        let n = new(&mut nodes, Kind::Thread(t.tid));
        nodes[n].out = Some(lock_node[li]);
        thread_node.insert(t.tid, n);
    }
    for key in shared_order {
        let tids = shared.remove(&key).unwrap_or_default();
        let kind = if tids.len() == 1 { Kind::Thread(tids[0]) } else { Kind::Threads(tids.clone()) };
        let n = new(&mut nodes, kind);
        nodes[n].out = Some(lock_node[key.0]);
        if tids.len() == 1 {
            thread_node.insert(tids[0], n);
        }
    }
    // Owners: threads that wait for nothing still get a box; an owner that is gone gets a ghost.
    let mut exited: HashMap<u32, usize> = HashMap::new();
    for (i, l) in report.locks.iter().enumerate() {
        let target = match &l.owner {
            Owner::Known { tid } | Owner::Inferred { tid, .. } if report.threads.iter().any(|t| t.tid == *tid) => {
                Some(*thread_node.entry(*tid).or_insert_with(|| new(&mut nodes, Kind::Thread(*tid))))
            }
            Owner::Known { tid } | Owner::Inferred { tid, .. } | Owner::Exited { tid } => {
                Some(*exited.entry(*tid).or_insert_with(|| new(&mut nodes, Kind::Exited(*tid))))
            }
            _ => None,
        };
        let ln = lock_node[i];
        nodes[ln].out = target;
        nodes[ln].out_inferred = matches!(l.owner, Owner::Inferred { .. });
    }
    // The report's cycles, highlighted.
    for d in &report.deadlocks {
        for (i, tid) in d.tids.iter().enumerate() {
            let next = d.tids[(i + 1) % d.tids.len()];
            let (Some(&tn), Some(&li)) = (thread_node.get(tid), d.locks.get(i).and_then(|id| lock_index.get(id.as_str()))) else { continue };
            let ln = lock_node[li];
            nodes[tn].cycle = true;
            nodes[ln].cycle = true;
            if nodes[tn].out == Some(ln) {
                nodes[tn].out_cycle = true;
            }
            if thread_node.get(&next).is_some_and(|&nn| nodes[ln].out == Some(nn)) {
                nodes[ln].out_cycle = true;
            }
        }
    }
    // A cycle through the thread pool: its task needs a worker of the pool, whose every worker
    // is blocked, the cycle's first thread among them.
    for (di, d) in report.deadlocks.iter().enumerate() {
        if d.thread_pool.is_none() {
            continue;
        }
        let (Some(&first), Some(&li)) = (d.tids.first().and_then(|t| thread_node.get(t)), d.locks.last().and_then(|id| lock_index.get(id.as_str()))) else { continue };
        let pn = new(&mut nodes, Kind::Pool(di));
        let ln = lock_node[li];
        nodes[ln].out = Some(pn);
        nodes[ln].out_cycle = true;
        nodes[pn].out = Some(first);
        nodes[pn].out_cycle = true;
        nodes[pn].cycle = true;
    }
    let (parts, left_out, left_out_nodes) = parts(report, &nodes, &thread_node);
    Graph { nodes, parts, left_out, left_out_nodes }
}

/// Splits the graph into its parts (each ends in a sink or in one of the report's cycles) and
/// picks those to draw.
fn parts(report: &Report, nodes: &[Node], thread_node: &HashMap<u32, usize>) -> (Vec<Part>, usize, usize) {
    const UNSEEN: usize = usize::MAX;
    let mut part_of = vec![UNSEEN; nodes.len()];
    let mut all: Vec<Part> = Vec::new();
    // The rings are the report's cycles, in its order, each from its first thread.
    let lock_node = |id: &str| nodes.iter().position(|n| matches!(n.kind, Kind::Lock(i) if report.locks[i].id == id));
    for (di, d) in report.deadlocks.iter().enumerate() {
        let mut ring: Option<Vec<usize>> = d.tids.iter().zip(&d.locks).flat_map(|(t, l)| [thread_node.get(t).copied(), lock_node(l)]).collect();
        if let (Some(r), Some(pn)) = (ring.as_mut(), d.thread_pool.as_ref().and_then(|_| nodes.iter().position(|n| n.kind == Kind::Pool(di)))) {
            r.push(pn);
        }
        let Some(ring) = ring.filter(|r| !r.is_empty() && r.iter().all(|&n| part_of[n] == UNSEEN)) else { continue };
        all.push(Part { ring: ring.clone(), root: None, size: 0 });
        for &n in &ring {
            part_of[n] = all.len() - 1;
        }
    }
    for start in 0..nodes.len() {
        let mut path: Vec<usize> = Vec::new();
        let mut v = start;
        let part = loop {
            if part_of[v] != UNSEEN {
                break part_of[v];
            }
            // A loop that is none of the report's cycles cannot be (the graph found them all);
            // were it there, it is drawn as a tree ending where the walk came round.
            let next = nodes[v].out.filter(|w| !path.contains(w) && *w != v);
            path.push(v);
            match next {
                Some(w) => v = w,
                None => {
                    path.pop();
                    all.push(Part { ring: Vec::new(), root: Some(v), size: 0 });
                    part_of[v] = all.len() - 1;
                    break all.len() - 1;
                }
            }
        };
        for n in path {
            part_of[n] = part;
        }
    }
    for &p in &part_of {
        all[p].size += 1;
    }
    // Rings first, in the report's order (they were made first), then the largest trees.
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| (all[i].ring.is_empty(), if all[i].ring.is_empty() { 0 } else { i }, std::cmp::Reverse(all[i].size), i));
    let mut drawn = Vec::new();
    let (mut budget, mut left_out, mut left_out_nodes) = (MAX_NODES, 0, 0);
    let mut taken: Vec<Option<Part>> = all.into_iter().map(Some).collect();
    for i in order {
        let p = taken[i].take().unwrap();
        if p.ring.is_empty() && p.size > budget {
            left_out += 1;
            left_out_nodes += p.size;
            continue;
        }
        budget = budget.saturating_sub(p.size);
        drawn.push(p);
    }
    (drawn, left_out, left_out_nodes)
}

struct Placed {
    col: Vec<f64>,
    row: Vec<f64>,
}

fn draw(report: &Report, g: &Graph) -> String {
    let n = g.nodes.len();
    // Children: the nodes whose edge leads here, cycle edges aside.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in g.nodes.iter().enumerate() {
        if let Some(o) = node.out {
            let ring_edge = g.parts.iter().any(|p| p.ring.contains(&i) && p.ring.contains(&o));
            if !ring_edge {
                children[o].push(i);
            }
        }
    }
    // Depth: the distance to the part's sink or ring.
    let mut depth = vec![usize::MAX; n];
    let mut drawn = vec![false; n];
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for p in &g.parts {
        for &r in p.ring.iter().chain(p.root.iter()) {
            stack.push((r, 0));
        }
    }
    while let Some((v, d)) = stack.pop() {
        depth[v] = d;
        drawn[v] = true;
        for &c in &children[v] {
            stack.push((c, d + 1));
        }
    }
    let max_depth = (0..n).filter(|&i| drawn[i]).map(|i| depth[i]).max().unwrap_or(0);
    let mut placed = Placed { col: vec![0.0; n], row: vec![0.0; n] };
    let mut next_row = 0.0;
    for p in &g.parts {
        for (k, &r) in p.ring.iter().chain(p.root.iter()).enumerate() {
            if k > 0 {
                next_row += RING_GAP;
            }
            place(r, &children, &mut placed, &mut next_row);
        }
        next_row += 0.4;
    }
    for (col, d) in placed.col.iter_mut().zip(&depth) {
        *col = (max_depth - (*d).min(max_depth)) as f64;
    }
    let has_ring = g.parts.iter().any(|p| !p.ring.is_empty());
    let width = PAD * 2.0 + (max_depth as f64 + 1.0) * (NODE_W + COL_GAP) - COL_GAP + if has_ring { ARC_ROOM } else { 0.0 };
    let height = PAD * 2.0 + (next_row - 0.4).max(1.0) * ROW_H - (ROW_H - NODE_H);
    let x = |i: usize| PAD + placed.col[i] * (NODE_W + COL_GAP);
    let y = |i: usize| PAD + placed.row[i] * ROW_H;
    let labels = (0..n).filter(|&i| drawn[i]).count() <= 40;

    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="wfg" role="img" aria-labelledby="wfg-title" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}"><title id="wfg-title">Wait-for graph: threads and locks; arrows point from a waiting thread to the lock it waits for, and from a lock to the thread that holds it</title>"##,
        w = width,
        h = height
    );
    s.push_str(r##"<defs><marker id="wfg-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="head wait"/></marker><marker id="wfg-arrow-held" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="head held"/></marker><marker id="wfg-arrow-cycle" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="head cycle"/></marker></defs>"##);

    // Edges first, so boxes sit on top of them.
    s.push_str("<g class=\"edges\">");
    for (i, node) in g.nodes.iter().enumerate() {
        let Some(o) = node.out else { continue };
        if !drawn[i] || !drawn[o] {
            continue;
        }
        let held = matches!(node.kind, Kind::Lock(_));
        let mut class = String::from(if held { "edge held" } else { "edge wait" });
        if node.out_inferred {
            class.push_str(" inferred");
        }
        if node.out_cycle {
            class.push_str(" cycle");
        }
        let marker = if node.out_cycle { "wfg-arrow-cycle" } else if held { "wfg-arrow-held" } else { "wfg-arrow" };
        let words = match (&node.kind, &g.nodes[o].kind) {
            (Kind::Pool(_), _) => pool_edge_words(true),
            (_, Kind::Pool(_)) => pool_edge_words(false),
            _ => edge_words(held, node.out_inferred),
        };
        let title = format!("{} {} {}", node_name(report, &node.kind), words, node_name(report, &g.nodes[o].kind));
        let ring_edge = g.parts.iter().any(|p| p.ring.contains(&i) && p.ring.contains(&o));
        let (d, lx, ly, anchor) = if ring_edge && placed.row[o] > placed.row[i] {
            // Down the cycle's column.
            let cx = x(i) + NODE_W / 2.0;
            (format!("M{cx:.1},{:.1} L{cx:.1},{:.1}", y(i) + NODE_H, y(o) - 1.0), cx + 6.0, (y(i) + NODE_H + y(o)) / 2.0 + 3.0, "start")
        } else if ring_edge {
            // The arc that closes the cycle, on its right.
            let (x1, y1, y2) = (x(i) + NODE_W, y(i) + NODE_H / 2.0, y(o) + NODE_H / 2.0);
            let bulge = x1 + 64.0;
            // A cubic with both control points at `bulge` reaches three quarters of the way.
            (format!("M{x1:.1},{y1:.1} C{bulge:.1},{y1:.1} {bulge:.1},{y2:.1} {:.1},{y2:.1}", x1 + 1.0), x1 + 52.0, (y1 + y2) / 2.0 + 4.0, "start")
        } else {
            let (x1, y1, x2, y2) = (x(i) + NODE_W, y(i) + NODE_H / 2.0, x(o) - 1.0, y(o) + NODE_H / 2.0);
            let xm = (x1 + x2) / 2.0;
            (format!("M{x1:.1},{y1:.1} C{xm:.1},{y1:.1} {xm:.1},{y2:.1} {x2:.1},{y2:.1}"), xm, (y1 + y2) / 2.0 - 5.0, "middle")
        };
        let _ = write!(s, r#"<path class="{class}" d="{d}" marker-end="url(#{marker})"><title>{}</title></path>"#, escape(&title));
        if labels {
            let _ = write!(s, r#"<text class="elabel{}" x="{lx:.1}" y="{ly:.1}" text-anchor="{anchor}">{words}</text>"#, if node.out_cycle { " cycle" } else { "" });
        }
    }
    s.push_str("</g><g class=\"nodes\">");
    for (i, node) in g.nodes.iter().enumerate() {
        if !drawn[i] {
            continue;
        }
        node_svg(&mut s, report, node, x(i), y(i));
    }
    s.push_str("</g></svg>");
    if g.left_out > 0 {
        let _ = write!(s, r#"<p class="note">{} more part{} of the graph ({} boxes) not drawn; every lock and thread is listed below.</p>"#, g.left_out, if g.left_out == 1 { "" } else { "s" }, g.left_out_nodes);
    }
    s
}

/// Rows as a tidy tree: leaves one after another, each parent centred on its children.
fn place(v: usize, children: &[Vec<usize>], p: &mut Placed, next_row: &mut f64) {
    if children[v].is_empty() {
        p.row[v] = *next_row;
        *next_row += 1.0;
        return;
    }
    for &c in &children[v] {
        place(c, children, p, next_row);
    }
    let first = p.row[children[v][0]];
    let last = p.row[*children[v].last().unwrap()];
    p.row[v] = (first + last) / 2.0;
}

fn node_name(report: &Report, kind: &Kind) -> String {
    match kind {
        Kind::Thread(t) => format!("thread {t}"),
        Kind::Threads(ts) => format!("{} threads", ts.len()),
        Kind::Exited(t) => format!("thread {t} (exited)"),
        Kind::Lock(i) => lock_name(&report.locks[*i]),
        Kind::Pool(_) => "the thread pool".to_string(),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_string() } else { s.chars().take(max - 1).collect::<String>() + "…" }
}

fn node_svg(s: &mut String, report: &Report, node: &Node, x: f64, y: f64) {
    let (class, href, line1, line2, title) = match &node.kind {
        Kind::Thread(tid) => {
            let t = report.threads.iter().find(|t| t.tid == *tid);
            let state = t.map(|t| state_words(t, &report.locks)).unwrap_or_default();
            let name = t.and_then(|t| t.name.as_deref()).map(|n| format!(" \"{n}\"")).unwrap_or_default();
            let line2 = t.map(|t| t.state.to_string()).unwrap_or_default();
            ("node thread", format!("#t{tid}"), format!("thread {tid}{name}"), line2, format!("thread {tid}{name} — {state}"))
        }
        Kind::Threads(tids) => {
            let list: Vec<String> = tids.iter().map(|t| t.to_string()).collect();
            let state = report.threads.iter().find(|t| t.tid == tids[0]).map(|t| state_words(t, &report.locks)).unwrap_or_default();
            ("node thread many", format!("#t{}", tids[0]), format!("{} threads, same stack", tids.len()), list.join(", "), format!("threads {} — {state}", list.join(", ")))
        }
        Kind::Exited(tid) => ("node thread exited", String::new(), format!("thread {tid}"), "exited (not in the dump)".to_string(), format!("thread {tid}: the lock names it as owner, but it is not among the dump's threads")),
        Kind::Lock(i) => {
            let l = &report.locks[*i];
            let mut title = format!("{} — {}", lock_name(l), super::words::lock_detail(l));
            if let Some(a) = l.address {
                let _ = write!(title, " at {a}");
            }
            let _ = write!(title, " — {}", owner_words(l));
            // A lock without an owner to point at says why on its second line.
            let line2 = match l.owner {
                Owner::Readers { .. } | Owner::Unknown { .. } => owner_words(l),
                _ => super::words::lock_detail(l),
            };
            let (line1, line2) = match &l.managed {
                // Two monitors of one cycle are often on objects of one type: the first line
                // names what holds the object (or its type), the second its address, so that no
                // two nodes read alike.
                Some(m) => {
                    let ty = m.type_name.as_deref().unwrap_or("object");
                    let short = ty.rsplit('.').next().unwrap_or(ty);
                    let first = match m.referrers.first().filter(|r| !r.field.starts_with('[')) {
                        Some(r) => referrer(r),
                        None => format!("{} on {short}", l.kind),
                    };
                    (first, format!("{} at {}", l.kind, m.object))
                }
                None => (lock_name(l), line2),
            };
            ("node lock", format!("#l{i}"), line1, line2, title)
        }
        Kind::Pool(di) => {
            let (line1, line2) = report.deadlocks.get(*di).and_then(|d| d.thread_pool.as_ref()).map(pool_node_words).unwrap_or_default();
            ("node pool", String::new(), line1.clone(), line2.clone(), format!("{line1}: {line2}"))
        }
    };
    let class = if node.cycle { format!("{class} cycle") } else { class.to_string() };
    let rx = if matches!(node.kind, Kind::Lock(_)) { 20.0 } else { 4.0 };
    let _ = write!(s, r#"<g class="{class}">"#);
    if !href.is_empty() {
        let _ = write!(s, r#"<a href="{href}">"#);
    }
    let _ = write!(
        s,
        r#"<title>{}</title><rect x="{x:.1}" y="{y:.1}" width="{NODE_W}" height="{NODE_H}" rx="{rx}"/><text class="l1" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text class="l2" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        escape(&title),
        x + NODE_W / 2.0,
        y + 18.0,
        escape(&clip(&line1, LINE1_CHARS)),
        x + NODE_W / 2.0,
        y + 34.0,
        escape(&clip(&line2, LINE2_CHARS)),
    );
    if !href.is_empty() {
        s.push_str("</a>");
    }
    s.push_str("</g>");
}
