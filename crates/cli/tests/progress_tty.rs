//! The progress bar never leaves a stale line between results on a terminal
//! (issue 12, item 2). `check` over a directory runs under `script(1)`, which
//! gives it a pseudo-terminal, so the bar is drawn exactly as a user sees it;
//! the byte stream is then replayed through a minimal terminal (`\r`, `\n`,
//! `ESC[K`/`ESC[2K`, cursor up) and the final screen is checked: every result
//! line is intact and no bar line survives between them.
//! Skips when `script` (util-linux) is not installed.

use pcapsleuth_testkit::{fixtures_dir, in_ci};
use std::process::Command;

/// Replay `bytes` on a screen of unlimited height; returns the final lines.
fn screen(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut lines: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                row += 1;
                col = 0;
                if lines.len() <= row {
                    lines.push(Vec::new());
                }
            }
            '\r' => col = 0,
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut arg = String::new();
                let mut cmd = ' ';
                for d in chars.by_ref() {
                    if d.is_ascii_digit() || d == ';' || d == '?' {
                        arg.push(d);
                    } else {
                        cmd = d;
                        break;
                    }
                }
                let n: usize = arg.parse().unwrap_or(0);
                match cmd {
                    'K' if n == 2 => lines[row].clear(),
                    'K' => lines[row].truncate(col),
                    'A' => row = row.saturating_sub(n.max(1)),
                    'G' => col = n.saturating_sub(1),
                    _ => {}
                }
            }
            c if c.is_control() => {}
            c => {
                let line = &mut lines[row];
                if line.len() <= col {
                    line.resize(col, ' ');
                    line.push(c);
                } else {
                    line[col] = c;
                }
                col += 1;
            }
        }
    }
    lines
        .into_iter()
        .map(|l| l.into_iter().collect::<String>().trim_end().to_string())
        .collect()
}

#[test]
fn check_over_a_directory_leaves_no_stale_bar_line_on_a_terminal() {
    let ok = Command::new("script").arg("--version").output().is_ok();
    if !ok {
        assert!(!in_ci(), "script(1) is required in CI (util-linux)");
        println!("SKIP: script(1) not installed");
        return;
    }
    let dir = fixtures_dir();
    let cmd = format!(
        "{} check --fail-on error {}",
        env!("CARGO_BIN_EXE_pcapsleuth"),
        dir.display()
    );
    let out = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("COLUMNS", "200")
        .env("NO_COLOR", "1")
        .output()
        .expect("script runs");
    assert!(
        out.stdout.windows(3).any(|w| w == "░".as_bytes())
            || out.stdout.windows(3).any(|w| w == "█".as_bytes()),
        "the bar was drawn (a terminal was seen): {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let lines = screen(&out.stdout);
    let results: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.contains(": ok:")
                || l.contains(": FAIL:")
                || l.contains("INCOMPLETE")
                || l.contains("ERROR")
        })
        .collect();
    let captures = pcapsleuth_testkit::captures_under(&dir).len();
    assert_eq!(
        results.len(),
        captures,
        "one intact line per capture:\n{}",
        lines.join("\n")
    );
    for l in &lines {
        let bar = l.contains('░') || l.contains('█') || l.contains(" captures ");
        assert!(
            !bar || l == lines.iter().rev().find(|x| !x.is_empty()).unwrap(),
            "stale progress-bar line on the screen: {l:?}\n{}",
            lines.join("\n")
        );
    }
}

/// The replay itself: a bar cleared before a result leaves nothing; a bar
/// followed by a newline stays on the screen (what the check above rejects).
#[test]
fn screen_replay_tells_a_cleared_bar_from_a_stale_one() {
    let cleared = screen("░░ 1/2 captures\r\u{1b}[2Ka: ok: 0 findings\n░░ 2/2 captures".as_bytes());
    assert_eq!(cleared, ["a: ok: 0 findings", "░░ 2/2 captures"]);
    let stale = screen("░░ 1/2 captures\na: ok: 0 findings\n".as_bytes());
    assert_eq!(stale[0], "░░ 1/2 captures");
}
