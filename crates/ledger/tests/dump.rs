//! `LEDGER_DUMP=path cargo test -p pcapsleuth-ledger --test dump -- --nocapture`:
//! print the ledger of one capture (a debugging aid; does nothing without the variable).

mod common;

#[test]
fn dump() {
    let Ok(p) = std::env::var("LEDGER_DUMP") else {
        return;
    };
    for path in p.split(',') {
        let r = common::ledger_of(std::path::Path::new(path)).expect("capture opens");
        if std::env::var("LEDGER_JSON").is_ok() {
            println!("{}", serde_json::to_string_pretty(&r).unwrap());
            continue;
        }
        println!(
            "== {path}: total {} ms {:?}",
            r.total_stall_ms, r.time_lost_by_cause
        );
        for s in &r.streams {
            println!(
                "stream {} {}:{} -> {}:{}  {}",
                s.tcp_stream, s.client.addr, s.client.port, s.server.addr, s.server.port, s.summary
            );
            for e in &s.stalls {
                println!(
                    "   {:>6}-{:<6} {:?} {:>10.3} ms {:?} {:?}",
                    e.start_frame, e.end_frame, e.dir, e.duration_ms, e.cause, e.evidence
                );
            }
        }
    }
}

/// `LEDGER_RULE=substring`: list every corpus entry whose rule contains it.
#[test]
fn rule_hits() {
    let Ok(rule) = std::env::var("LEDGER_RULE") else {
        return;
    };
    let Some(shared) = pcapsleuth_testkit::shared_dir() else {
        return;
    };
    for p in pcapsleuth_testkit::captures_under(&shared.join("captures")) {
        let Some(r) = common::ledger_of(&p) else {
            continue;
        };
        for e in r.streams.iter().flat_map(|s| s.stalls.iter()) {
            if e.evidence.rule.contains(&rule) {
                println!(
                    "{} stream {} {}-{} {:.1} ms {:?} seg {:?}",
                    p.display(),
                    e.tcp_stream,
                    e.start_frame,
                    e.end_frame,
                    e.duration_ms,
                    e.cause,
                    e.evidence.segment_bytes
                );
            }
        }
    }
}
