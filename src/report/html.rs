//! The report for a browser: one self-contained HTML file (inline CSS, a little inline script,
//! inline SVG; it loads nothing from anywhere). Same order as the text report: the verdict and
//! each cycle on top, the wait-for graph, then every contended lock with its owner's stack first
//! and whole and its waiters grouped, then every other group of identical stacks, then a flame
//! graph of all stacks. Everything taken from the dump is escaped.

use super::flame;
use super::model::{FrameReport, Report, ThreadReport, Verdict};
use super::svg;
use super::words::{lock_name, owner_words, plural, state_words};
use crate::unwind::Trust;
use crate::waits::{LockFact, Owner};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Escapes text for HTML and XML: element content and quoted attribute values alike.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub fn render(report: &Report) -> String {
    let mut out = String::with_capacity(64 * 1024);
    let d = &report.dump;
    let what = d.process_name.clone().filter(|n| !n.is_empty()).or_else(|| d.path.rsplit('/').next().map(str::to_string)).unwrap_or_default();
    let pid = d.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><meta name=\"generator\" content=\"knot {}\"><title>{} — {}{} — knot</title><style>{CSS}{}</style></head>\n<body>\n",
        escape(&report.knot_version),
        escape(&super::words::verdict(report.verdict).to_uppercase()),
        escape(&what),
        escape(&pid),
        super::gc_html::CSS
    );
    // The crash, if any, comes first, with the crashed thread's stack.
    let crashed = super::crash_html::section(&mut out, report);
    verdict(&mut out, report);
    contended_table(&mut out, report);
    if let Some(d) = report.dotnet.as_ref() {
        super::gc_html::section(&mut out, d, &super::gc_text::said_suspects(report));
        super::async_html::section(&mut out, d);
    }
    graph(&mut out, report);
    let mut shown = locks(&mut out, report);
    shown.extend(crashed);
    others(&mut out, report, &shown);
    flame_graph(&mut out, report);
    diagnostics(&mut out, report);
    modules(&mut out, report);
    let _ = write!(
        out,
        "<footer>Written by knot {} (report schema v{}). This file is self-contained: it loads nothing from anywhere.</footer>\n<script>{JS}</script>\n</body></html>\n",
        escape(&report.knot_version),
        report.schema_version
    );
    out
}

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Deadlock | Verdict::Crash | Verdict::Abandoned => "deadlock",
        Verdict::Contention => "contention",
        Verdict::ThreadPoolStarved | Verdict::GcStall => "contention",
        Verdict::BlockedOnIo => "io",
        Verdict::Idle => "idle",
        Verdict::NothingBlocked => "ok",
        Verdict::NotAnalyzed => "idle",
    }
}

fn lock_index(r: &Report, id: &str) -> Option<usize> {
    r.locks.iter().position(|l| l.id == id)
}

fn thread_by_tid(r: &Report, tid: u32) -> Option<&ThreadReport> {
    r.threads.iter().find(|t| t.tid == tid)
}

fn tid_link(tid: u32) -> String {
    format!("<a class=\"tid\" href=\"#t{tid}\">{tid}</a>")
}

fn lock_link(r: &Report, id: &str) -> String {
    match lock_index(r, id) {
        Some(i) => format!("<a class=\"lockname\" href=\"#l{i}\">{}</a>", escape(&lock_name(&r.locks[i]))),
        None => escape(id),
    }
}

fn header_line(r: &Report) -> String {
    let d = &r.dump;
    let mut s = escape(&d.path);
    if let Some(pid) = d.pid {
        let _ = write!(s, ": pid {pid}");
    }
    if let Some(cmd) = d.command_line.as_deref().filter(|c| !c.is_empty()) {
        let _ = write!(s, " <code>{}</code>", escape(cmd));
    }
    if let Some(sig) = &d.signal {
        let _ = write!(s, ", {}", escape(&sig.name));
        if let Some(a) = sig.fault_address {
            let _ = write!(s, " at {a}");
        }
    }
    let (threads, modules) = (r.threads.len(), r.modules.len());
    let plural = crate::report::words::plural;
    let _ = write!(s, "; {threads} thread{}, {modules} module{}", plural(threads), plural(modules));
    if d.partial {
        s.push_str(" <span class=\"warn\">(partial: see the warnings)</span>");
    }
    s
}

fn verdict(out: &mut String, r: &Report) {
    let blocked = r.threads.iter().filter(|t| t.blocked_on.is_some()).count();
    let contended = r.locks.iter().filter(|l| !l.waiter_tids.is_empty()).count();
    let mut line = String::new();
    // The pool's words first, as the text says them (the deadlock through it, or its starvation
    // with its cause).
    let pool = super::words::pool_verdict(r);
    match &pool {
        Some(p) => {
            let _ = write!(line, "{}; ", escape(p.line.trim_start_matches(" — ").trim_start()));
        }
        None if r.verdict == Verdict::Deadlock => {
            let n: usize = r.deadlocks.iter().map(|d| d.tids.len()).sum();
            let _ = write!(line, "{n} thread{} in {} cycle{}; ", plural(n), r.deadlocks.len(), plural(r.deadlocks.len()));
        }
        None if r.verdict == Verdict::Abandoned => {
            let _ = write!(line, "{}; ", escape(&super::words::abandoned(&r.locks)));
        }
        None => {}
    }
    let _ = write!(line, "{blocked} of {} threads blocked on {contended} lock{}", r.threads.len(), plural(contended));
    if let Some(cause) = pool.and_then(|p| p.cause) {
        let _ = write!(line, "<br>cause: {}", escape(&cause));
    }
    for l in &r.verdict_limits {
        let _ = write!(line, "<br><span class=\"warn\">limited by {}: {}; fix: {}</span>", escape(&l.missing), escape(&l.hides), escape(&l.fix));
    }
    let _ = write!(
        out,
        "<header class=\"verdict {}\"><p class=\"dump\">{}</p><h1><span class=\"label\">Verdict:</span> {}</h1><p class=\"summary\">{}</p>",
        verdict_class(r.verdict),
        header_line(r),
        escape(&super::words::verdict(r.verdict).to_uppercase()),
        line
    );
    super::gc_html::suspects_at(out, r, super::gc_text::SuspectPlace::First);
    if !r.deadlocks.is_empty() {
        out.push_str("<ol class=\"cycles\">");
        for d in &r.deadlocks {
            out.push_str("<li><span class=\"chain\">");
            for (i, tid) in d.tids.iter().enumerate() {
                let _ = write!(out, "<span class=\"chip t\">thread {}</span> → ", tid_link(*tid));
                if let Some(l) = d.locks.get(i) {
                    let _ = write!(out, "<span class=\"chip l\">{}</span> → ", lock_link(r, l));
                }
            }
            if let Some(first) = d.tids.first() {
                let _ = write!(out, "<span class=\"chip t\">thread {}</span>", tid_link(*first));
            }
            out.push_str("</span>");
            if d.inferred {
                out.push_str(" <span class=\"tag\">through an inferred owner</span>");
            }
            let _ = write!(out, "<p class=\"words\">cycle: {}</p></li>", escape(&d.description));
        }
        out.push_str("</ol>");
    }
    super::gc_html::suspects_at(out, r, super::gc_text::SuspectPlace::AfterVerdict);
    out.push_str("</header>\n");
}

fn contended_table(out: &mut String, r: &Report) {
    let contended: Vec<(usize, &LockFact)> = r.locks.iter().enumerate().filter(|(_, l)| !l.waiter_tids.is_empty()).collect();
    if contended.is_empty() {
        return;
    }
    out.push_str("<section id=\"contended\"><h2>Locks with waiters</h2><table><thead><tr><th>lock</th><th>what</th><th>address</th><th>owner</th><th class=\"n\">waiters</th></tr></thead><tbody>");
    for (i, l) in contended.iter().take(50) {
        let _ = write!(
            out,
            "<tr><td><a class=\"lockname\" href=\"#l{i}\">{}</a></td><td>{}</td><td class=\"mono\">{}</td><td class=\"owner\">{}</td><td class=\"n\">{}</td></tr>",
            escape(&lock_name(l)),
            escape(&super::words::lock_detail(l)),
            l.address.map(|a| a.to_string()).unwrap_or_default(),
            owner_html(l),
            l.waiter_tids.len()
        );
    }
    out.push_str("</tbody></table>");
    if contended.len() > 50 {
        let _ = write!(out, "<p class=\"note\">… and {} more, below.</p>", contended.len() - 50);
    }
    out.push_str("</section>\n");
}

/// The owner in words, its thread linked.
fn owner_html(l: &LockFact) -> String {
    let words = escape(&owner_words(l));
    match l.owner {
        Owner::Known { tid } | Owner::Inferred { tid, .. } => words.replacen(&format!("thread {tid}"), &format!("thread {}", tid_link(tid)), 1),
        _ => words,
    }
}

fn graph(out: &mut String, r: &Report) {
    let Some(svg) = svg::wait_for_graph(r) else { return };
    out.push_str("<section id=\"graph\"><h2>Wait-for graph</h2><div class=\"scroll\">");
    out.push_str(&svg);
    out.push_str("</div><p class=\"legend\"><span class=\"sw thread\"></span> thread <span class=\"sw lock\"></span> lock <span class=\"ln wait\"></span> waits for <span class=\"ln held\"></span> held by <span class=\"ln inferred\"></span> probably held by (inferred) <span class=\"ln cycle\"></span> deadlock cycle. Click a box for its stack.</p></section>\n");
}

/// Each contended lock: the owner's stack first and whole, then the waiters grouped by stack.
/// Returns the threads whose stacks were shown.
fn locks(out: &mut String, r: &Report) -> BTreeSet<u32> {
    let mut shown = BTreeSet::new();
    let contended: Vec<(usize, &LockFact)> = r.locks.iter().enumerate().filter(|(_, l)| !l.waiter_tids.is_empty()).collect();
    if contended.is_empty() {
        return shown;
    }
    out.push_str("<section id=\"locks\"><h2>Locks</h2>\n");
    for (i, l) in contended {
        let in_cycle = r.deadlocks.iter().any(|d| d.locks.contains(&l.id));
        let _ = write!(out, "<article class=\"lock{}\" id=\"l{i}\"><h3><span class=\"lockname\">{}</span> — {}", if in_cycle { " cycle" } else { "" }, escape(&lock_name(l)), escape(&super::words::lock_detail(l)));
        if let Some(a) = l.address {
            let _ = write!(out, " at <span class=\"mono\">{a}</span>");
        }
        let _ = write!(out, " — <span class=\"owner\">{}</span></h3>", owner_html(l));
        if let Some(n) = l.recursion {
            let _ = write!(out, "<p>held {n} time{} (recursive)</p>", plural(n as usize));
        }
        if let Owner::Inferred { evidence, .. } = &l.owner {
            let _ = write!(out, "<p class=\"inferred\">inferred: {}</p>", escape(&evidence.to_string()));
        }
        if !l.evidence.is_empty() {
            let _ = write!(out, "<details class=\"evidence\"><summary>Evidence ({})</summary><ul>", l.evidence.len());
            for e in &l.evidence {
                let _ = write!(out, "<li>{}</li>", escape(&e.to_string()));
            }
            out.push_str("</ul></details>");
        }
        let crashed = r.crash.as_ref().filter(|c| c.kind != crate::crash::CrashKind::Killed).and_then(|c| c.thread);
        if let Some(owner) = l.owner.tid().filter(|&t| Some(t) == crashed) {
            let _ = write!(out, "<p class=\"shown\"><b>Owner:</b> thread {} (crashed; stack shown above)</p>", tid_link(owner));
        } else if let Some(owner) = l.owner.tid().and_then(|t| thread_by_tid(r, t)) {
            // Whole, every time: the call holding the lock is the answer. The anchor goes on its
            // first showing.
            let id = if shown.insert(owner.tid) { format!(" id=\"t{}\"", owner.tid) } else { String::new() };
            let _ = write!(out, "<details class=\"stack owner\" open><summary{id}><b>Owner:</b> {}</summary>", thread_title(owner, &r.locks));
            folded_frames(out, &owner.frames, &super::fold::crash_addresses(r));
            stack_end(out, owner);
            out.push_str("</details>");
        }
        let waiters = l.waiter_tids.iter().filter(|&&t| thread_by_tid(r, t).is_some()).count();
        let _ = write!(out, "<p class=\"waiters\"><b>Waiters:</b> {waiters} thread{}</p>", plural(waiters));
        for g in &r.groups {
            let tids: Vec<u32> = g.tids.iter().copied().filter(|t| l.waiter_tids.contains(t)).collect();
            if tids.is_empty() {
                continue;
            }
            for t in tids.iter().filter(|t| shown.contains(t)) {
                let _ = write!(out, "<p class=\"shown\">thread {} (stack shown above)</p>", tid_link(*t));
            }
            let fresh: Vec<u32> = tids.iter().copied().filter(|t| !shown.contains(t)).collect();
            if !fresh.is_empty() {
                group(out, r, &fresh, &g.frames, false);
                shown.extend(fresh);
            }
        }
        out.push_str("</article>\n");
    }
    out.push_str("</section>\n");
    shown
}

fn others(out: &mut String, r: &Report, shown: &BTreeSet<u32>) {
    let rest: Vec<_> = r.groups.iter().filter(|g| g.tids.iter().any(|t| !shown.contains(t))).collect();
    if rest.is_empty() {
        return;
    }
    let _ = writeln!(out, "<section id=\"threads\"><h2>{}</h2><p class=\"tools\"><button type=\"button\" data-open=\"1\">open all</button> <button type=\"button\" data-open=\"0\">close all</button></p>", if shown.is_empty() { "Threads" } else { "Other threads" });
    for g in rest {
        let tids: Vec<u32> = g.tids.iter().copied().filter(|t| !shown.contains(t)).collect();
        group(out, r, &tids, &g.frames, false);
    }
    out.push_str("</section>\n");
}

/// One group of threads with identical stacks, folded: the summary says who and in what state.
fn group(out: &mut String, r: &Report, tids: &[u32], frames_: &[FrameReport], open: bool) {
    let first = tids.first().and_then(|&t| thread_by_tid(r, t));
    let state = first.map(|t| state_words(t, &r.locks)).unwrap_or_default();
    // A long list goes inside, where the anchors are; the summary names the first few.
    const IN_SUMMARY: usize = 12;
    let anchors: Vec<String> = tids.iter().map(|t| format!("<span class=\"tid\" id=\"t{t}\">{t}</span>")).collect();
    let summary_list = if tids.len() <= IN_SUMMARY {
        anchors.join(", ")
    } else {
        let first: Vec<String> = tids.iter().take(IN_SUMMARY).map(|t| t.to_string()).collect();
        format!("{}, … and {} more", first.join(", "), tids.len() - IN_SUMMARY)
    };
    let _ = write!(
        out,
        "<details class=\"stack group\"{}><summary>{} thread{} <span class=\"state\">({})</span>{}: {}</summary>",
        if open { " open" } else { "" },
        tids.len(),
        plural(tids.len()),
        state_html(first, r, &state),
        super::words::group_role_words(tids.iter().filter_map(|&t| thread_by_tid(r, t))).map(|w| format!(" <span class=\"role\">[{}]</span>", escape(&w))).unwrap_or_default(),
        summary_list
    );
    if tids.len() > IN_SUMMARY {
        let _ = write!(out, "<p class=\"tids\">{}</p>", anchors.join(", "));
    }
    frames(out, frames_);
    if let Some(t) = first {
        stack_end(out, t);
    }
    out.push_str("</details>\n");
}

fn state_html(t: Option<&ThreadReport>, r: &Report, words: &str) -> String {
    match t.and_then(|t| t.blocked_on.as_deref()).and_then(|id| lock_index(r, id)) {
        Some(i) => {
            let name = escape(&lock_name(&r.locks[i]));
            escape(words).replacen(&name, &format!("<a class=\"lockname\" href=\"#l{i}\">{name}</a>"), 1)
        }
        None => escape(words),
    }
}

fn thread_title(t: &ThreadReport, r_locks: &[LockFact]) -> String {
    let mut s = format!("Thread {}", t.tid);
    if let Some(own) = super::words::own_tid_words(t) {
        let _ = write!(s, " ({})", escape(&own));
    }
    if let Some(name) = &t.name {
        let _ = write!(s, " \"{}\"", escape(name));
    }
    if let Some(role) = super::words::role_words(t) {
        let _ = write!(s, " <span class=\"role\">[{}]</span>", escape(&role));
    }
    if t.signalled {
        s.push_str(" (signalled)");
    }
    let _ = write!(s, " — <span class=\"state\">{}</span>", escape(&state_words(t, r_locks)));
    s
}

fn stack_end(out: &mut String, t: &ThreadReport) {
    if !t.stack_end.complete {
        let _ = write!(out, "<p class=\"warn\">stack incomplete: {}</p>", escape(&t.stack_end.detail));
    }
}

/// A stack, a run of unsymbolized frames of one module as one line (`report::fold`; the whole
/// run's addresses on hover). `keep`: the addresses no run may hide.
fn folded_frames(out: &mut String, frames: &[FrameReport], keep: &[u64]) {
    out.push_str("<div class=\"frames\">");
    for line in super::fold::fold(frames, keep) {
        match line {
            super::fold::Line::Frame(f) => frame(out, f),
            super::fold::Line::Run { module, frames } => {
                let (first, last) = (&frames[0], &frames[frames.len() - 1]);
                let ips: Vec<String> = frames.iter().map(|f| format!("#{} {:#x}", f.index, f.ip.0)).collect();
                let _ = write!(
                    out,
                    "<div class=\"f folded\" title=\"{}\"><span class=\"idx\">#{}-#{}</span> <span class=\"ip\">{:#018x}</span>  <span class=\"fn\">{}</span> <span class=\"mod\">(… {:#018x})</span></div>",
                    ips.join("\n"),
                    first.index,
                    last.index,
                    first.ip.0,
                    escape(&super::words::folded_frames(frames.len(), module)),
                    last.ip.0
                );
            }
        }
    }
    if frames.is_empty() {
        out.push_str("<div class=\"f\">(no frames)</div>");
    }
    out.push_str("</div>");
}

pub(crate) fn frames(out: &mut String, frames: &[FrameReport]) {
    out.push_str("<div class=\"frames\">");
    for f in frames {
        frame(out, f);
    }
    if frames.is_empty() {
        out.push_str("<div class=\"f\">(no frames)</div>");
    }
    out.push_str("</div>");
}

/// One frame's line.
fn frame(out: &mut String, f: &FrameReport) {
    {
        let cls = match f.trust {
            Trust::Scan => " scan",
            Trust::FramePointer => " fp",
            _ => "",
        };
        let _ = write!(out, "<div class=\"f{}{}\"><span class=\"idx\">#{:<3}</span> <span class=\"ip\">{:#018x}</span>  ", cls, if f.inlined { " inl" } else { "" }, f.index, f.ip.0);
        if let Some(t) = &f.transition {
            // A runtime transition record, named as SOS names it (`[InlinedCallFrame: addr]`).
            let _ = write!(out, "<span class=\"fn transition\">[{}: {:#x}]</span>", escape(&t.kind), t.address.0);
        } else if f.signal_frame {
            out.push_str("<span class=\"fn sig\">&lt;signal handler called&gt;</span>");
        } else {
            let _ = write!(out, "<span class=\"fn\">{}</span>", escape(f.function.as_deref().unwrap_or("??")));
            match (&f.file, f.line) {
                (Some(file), Some(line)) => {
                    let base = file.rsplit('/').next().unwrap_or(file);
                    let _ = write!(out, " <span class=\"loc\" title=\"{}:{line}\">({}:{line})</span>", escape(file), escape(base));
                }
                _ => {
                    if let (Some(off), Some(_)) = (f.function_offset, &f.function) {
                        let _ = write!(out, "<span class=\"off\">+{off}</span>");
                    }
                }
            }
        }
        if let Some(m) = &f.module {
            let _ = write!(out, " <span class=\"mod\">[{}]</span>", escape(m));
        }
        if f.inlined {
            out.push_str(" <span class=\"flag\">(inlined)</span>");
        }
        match f.trust {
            Trust::Scan => out.push_str(" <span class=\"flag warn\">(found by stack scan)</span>"),
            Trust::FramePointer => out.push_str(" <span class=\"flag\">(found by frame pointer)</span>"),
            _ => {}
        }
        out.push_str("</div>");
    }
}

fn flame_graph(out: &mut String, r: &Report) {
    let Some(svg) = flame::flame_graph(r) else { return };
    // The SVG runs its own script (zoom, search) that expects to be alone in its document, so
    // it gets one: an iframe whose document is inline (`srcdoc`), not fetched.
    let height = svg
        .split("<svg")
        .nth(1)
        .and_then(|s| s.split("height=\"").nth(1))
        .and_then(|s| s.split('"').next())
        .and_then(|h| h.parse::<f64>().ok())
        .unwrap_or(600.0);
    // Without the XML prolog and DTD, and without inferno's comment (it names web pages).
    let mut body = svg.find("<svg").map(|at| svg[at..].to_string()).unwrap_or_default();
    while let Some(start) = body.find("<!--") {
        let Some(len) = body[start..].find("-->") else { break };
        body.replace_range(start..start + len + 3, "");
    }
    let doc = format!("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>html,body{{margin:0;background:#fff}}svg{{display:block;width:100%}}</style></head><body>{body}</body></html>");
    let _ = writeln!(
        out,
        "<section id=\"flame\"><h2>Flame graph of all stacks</h2><iframe class=\"flame\" title=\"Flame graph of every thread's stack\" sandbox=\"allow-scripts\" style=\"height:{:.0}px\" srcdoc=\"{}\"></iframe></section>",
        height + 4.0,
        escape(&doc)
    );
}

fn diagnostics(out: &mut String, r: &Report) {
    let warnings: Vec<_> = r.diagnostics.iter().filter(|d| d.severity == crate::Severity::Warning).collect();
    if r.diagnostics.is_empty() {
        return;
    }
    let _ = write!(out, "<section id=\"diagnostics\"><h2>Diagnostics: {} warning{}</h2>", warnings.len(), plural(warnings.len()));
    if !warnings.is_empty() {
        out.push_str("<ul class=\"warnings\">");
        for d in &warnings {
            let _ = write!(out, "<li>[{}] {}", escape(d.stage), escape(&d.message));
            if let Some(o) = d.offset {
                let _ = write!(out, " (file offset {o:#x})");
            }
            out.push_str("</li>");
        }
        out.push_str("</ul>");
    }
    let _ = write!(out, "<details><summary>All {} diagnostics</summary><ul>", r.diagnostics.len());
    for d in &r.diagnostics {
        let _ = write!(out, "<li>{} [{}] {}</li>", if d.severity == crate::Severity::Warning { "warning" } else { "info" }, escape(d.stage), escape(&d.message));
    }
    out.push_str("</ul></details></section>\n");
}

fn modules(out: &mut String, r: &Report) {
    if r.modules.is_empty() {
        return;
    }
    let _ = write!(out, "<section id=\"modules\"><details><summary><h2>{} modules</h2></summary><table><thead><tr><th>path</th><th>range</th><th>build-id</th><th>file</th><th>symbols</th></tr></thead><tbody>", r.modules.len());
    for m in &r.modules {
        let _ = write!(
            out,
            "<tr><td class=\"path\" title=\"{}\">{}</td><td class=\"mono\">{}–{}</td><td class=\"mono\">{}</td><td title=\"{}\">{}{}</td><td>{}</td></tr>",
            escape(&m.path),
            path_html(&m.path),
            m.start,
            m.end,
            escape(m.build_id.as_deref().unwrap_or("")),
            escape(&format!("{}{}", m.file_status, m.file_detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())),
            escape(&m.file_status),
            m.file_detail.as_deref().map(|d| format!(": {}", escape(d))).unwrap_or_default(),
            escape(m.debug_info.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</tbody></table></details></section>\n");
}

/// A module's path in the modules table: its directory dimmed, its file name plain; the cell
/// wraps anywhere (the table's CSS), so a long path never widens the page.
fn path_html(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, base)) => format!("<span class=\"dir\">{}/</span>{}", escape(dir), escape(base)),
        None => escape(path),
    }
}

const CSS: &str = r#"
:root{--bg:#fff;--fg:#1b1f24;--dim:#5b6571;--line:#d6dae0;--panel:#f5f7f9;--accent:#0b5cad;--red:#c62828;--redbg:#fdecea;--amber:#a35c00;--amberbg:#fff4e0;--blue:#0b5cad;--bluebg:#e8f1fb;--green:#1e7a34;--greenbg:#e7f5ea;--thread:#eef3fb;--lock:#f6effa;--lockline:#7b3fa0}
@media (prefers-color-scheme: dark){:root{--bg:#15181c;--fg:#e6e9ed;--dim:#9aa4b0;--line:#343b44;--panel:#1d2127;--accent:#7fb6f0;--red:#ff6b6b;--redbg:#3a1d1d;--amber:#f0b45a;--amberbg:#35290f;--blue:#7fb6f0;--bluebg:#172a3d;--green:#7bd88f;--greenbg:#17301d;--thread:#1c2836;--lock:#2a1f33;--lockline:#c79be6}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1400px;padding:0 20px 40px;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
h2{font-size:18px;margin:28px 0 10px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:0 0 8px;font-weight:600}
code,.mono,.frames{font-family:ui-monospace,SFMono-Regular,"DejaVu Sans Mono",Menlo,Consolas,monospace}
.verdict{margin:16px 0 8px;padding:14px 18px;border-radius:8px;border-left:8px solid var(--dim);background:var(--panel)}
.verdict h1{margin:4px 0;font-size:30px;letter-spacing:.5px}.verdict h1 .label{font-weight:400;color:var(--dim);font-size:20px}
.verdict .dump{margin:0;color:var(--dim);font-size:13px;word-break:break-all}.verdict .summary{margin:2px 0 6px;font-size:16px}
.verdict.deadlock{border-color:var(--red);background:var(--redbg)}.verdict.deadlock h1{color:var(--red)}
.verdict.contention,.verdict.io{border-color:var(--amber);background:var(--amberbg)}.verdict.contention h1,.verdict.io h1{color:var(--amber)}
.verdict.idle{border-color:var(--blue);background:var(--bluebg)}.verdict.idle h1{color:var(--blue)}
.verdict.ok{border-color:var(--green);background:var(--greenbg)}.verdict.ok h1{color:var(--green)}
.cycles{margin:8px 0 0;padding-left:22px}.cycles li{margin:6px 0}.cycles .words{margin:2px 0 0;color:var(--dim);font-size:13px}
.chip{display:inline-block;padding:1px 8px;border-radius:4px;border:1px solid var(--red);background:var(--bg);font-size:14px;margin:1px 0}.chip.l{border-radius:12px}
.tag{font-size:12px;padding:1px 6px;border-radius:3px;background:var(--amberbg);color:var(--amber);border:1px solid var(--amber)}
table{border-collapse:collapse;width:100%;font-size:14px}th,td{text-align:left;padding:4px 10px;border-bottom:1px solid var(--line);vertical-align:top}th{color:var(--dim);font-weight:600}td.n,th.n{text-align:right}
#modules table{table-layout:fixed}#modules td{overflow-wrap:anywhere}#modules th:nth-child(1){width:27%}#modules th:nth-child(2){width:19ch}#modules th:nth-child(3){width:21ch}#modules th:nth-child(5){width:19%}#modules .dir{color:var(--dim)}
#contended table{table-layout:fixed}#contended td{overflow-wrap:anywhere}#contended th:nth-child(1){width:36%}#contended th:nth-child(2){width:14%}#contended th:nth-child(3){width:15ch}#contended th:nth-child(5){width:6em}
.lockname{font-weight:600;color:var(--lockline)}.owner{font-weight:600}
.scroll{overflow:auto;border:1px solid var(--line);border-radius:6px;background:var(--panel);max-height:80vh}
.legend{font-size:13px;color:var(--dim)}.sw{display:inline-block;width:14px;height:10px;border:1px solid var(--dim);vertical-align:middle;margin-left:10px}.sw.thread{background:var(--thread);border-radius:2px}.sw.lock{background:var(--lock);border-radius:6px;border-color:var(--lockline)}
.ln{display:inline-block;width:26px;border-top:2px solid var(--dim);vertical-align:middle;margin-left:12px}.ln.held{border-color:var(--blue)}.ln.inferred{border-top-style:dashed;border-color:var(--blue)}.ln.cycle{border-color:var(--red);border-top-width:3px}
svg.wfg{display:block;font-family:ui-monospace,SFMono-Regular,"DejaVu Sans Mono",Menlo,monospace}
svg.wfg .node rect{fill:var(--thread);stroke:var(--dim);stroke-width:1.2}svg.wfg .node.lock rect{fill:var(--lock);stroke:var(--lockline)}
svg.wfg .node.exited rect{stroke-dasharray:4 3;fill:var(--panel)}svg.wfg .node.many rect{stroke-width:2.5}
svg.wfg .node.cycle rect{stroke:var(--red);stroke-width:2.6}
svg.wfg .node text{fill:var(--fg)}svg.wfg .l1{font-size:12.5px;font-weight:700}svg.wfg .l2{font-size:11px;fill:var(--dim)!important}
svg.wfg .node a:hover rect{filter:brightness(.93)}
svg.wfg .edge{fill:none;stroke:var(--dim);stroke-width:1.6}svg.wfg .edge.held{stroke:var(--blue)}svg.wfg .edge.inferred{stroke-dasharray:6 4}
svg.wfg .edge.cycle{stroke:var(--red);stroke-width:2.8}
svg.wfg .head{fill:var(--dim)}svg.wfg .head.held{fill:var(--blue)}svg.wfg .head.cycle{fill:var(--red)}
svg.wfg .elabel{font-size:10.5px;fill:var(--dim)}svg.wfg .elabel.cycle{fill:var(--red)}
article.lock{border:1px solid var(--line);border-radius:8px;padding:10px 14px;margin:12px 0;background:var(--bg)}article.lock.cycle{border-left:6px solid var(--red)}
article.lock:target{box-shadow:0 0 0 3px var(--accent)}
details.stack{margin:6px 0;border:1px solid var(--line);border-radius:6px;background:var(--panel)}
details.stack>summary{cursor:pointer;padding:6px 10px;font-size:14px}details.stack[open]>summary{border-bottom:1px solid var(--line)}
details.owner{border-color:var(--amber)}details.owner>summary{background:var(--amberbg);border-radius:6px 6px 0 0}
summary:target,.tid:target{outline:2px solid var(--accent);outline-offset:2px}
.state{color:var(--dim)}.role{color:var(--accent,#2a6)}.tid{font-family:ui-monospace,monospace}
.frames{font-size:12.5px;padding:6px 10px;overflow-x:auto;white-space:pre}
.frames .f{line-height:1.55}.frames .idx,.frames .ip{color:var(--dim)}.frames .fn{font-weight:600}.frames .loc{color:var(--accent)}.frames .mod,.frames .off{color:var(--dim)}
.frames .inl .fn{font-style:italic;font-weight:500}.frames .flag{color:var(--dim);font-size:11.5px}.frames .scan{opacity:.75}
.warn{color:var(--amber)}.shown,.waiters{margin:6px 0;font-size:14px}.inferred{color:var(--amber);font-size:14px}
.evidence{font-size:13px;color:var(--dim)}.evidence ul{margin:4px 0}
.tools{margin:0 0 6px}button{font:inherit;font-size:12px;padding:2px 10px;border:1px solid var(--line);border-radius:4px;background:var(--panel);color:var(--fg);cursor:pointer}
iframe.flame{width:100%;border:1px solid var(--line);border-radius:6px;background:#fff}
#modules summary h2{display:inline-block;border:0;margin:20px 0 6px;cursor:pointer}
.note{font-size:13px;color:var(--dim)}
p.tids{margin:0;padding:6px 10px;font-size:12.5px;max-height:9em;overflow:auto;border-bottom:1px solid var(--line)}
footer{margin-top:32px;font-size:12px;color:var(--dim)}
"#;

/// Opens the folded sections around the target of a link (`#t123`, `#l0`), and the
/// open-all / close-all buttons.
const JS: &str = r#"
(function(){
  function reveal(){
    var id=decodeURIComponent(location.hash.slice(1)); if(!id) return;
    var el=document.getElementById(id); if(!el) return;
    for(var p=el;p;p=p.parentElement){ if(p.tagName==='DETAILS') p.open=true; }
    el.scrollIntoView({block:'center'});
  }
  window.addEventListener('hashchange',reveal); reveal();
  document.querySelectorAll('button[data-open]').forEach(function(b){
    b.addEventListener('click',function(){
      var open=b.getAttribute('data-open')==='1';
      b.closest('section').querySelectorAll('details').forEach(function(d){d.open=open;});
    });
  });
})();
"#;
