//! `pcapsleuth explain`: a detector's README (Markdown) rendered for a
//! terminal, and the detector list.

/// One detector as `explain` shows it.
#[derive(Debug, Clone, Copy)]
pub struct DetectorDoc<'a> {
    /// Detector id (`"mss-blackhole"`).
    pub id: &'a str,
    /// Other names accepted for it (`"pmtu-blackhole"`).
    pub aliases: &'a [&'a str],
    /// One-line title.
    pub title: &'a str,
    /// Its README.md: `# id: title`, a paragraph, `## …` sections.
    pub markdown: &'a str,
}

/// Column width `explain` wraps prose to.
pub const EXPLAIN_WIDTH: usize = 80;

/// The detector list: `  id  title` per detector, ids padded to one column,
/// aliases after the title (`(alias: pmtu-blackhole)`).
pub fn render_detector_list(docs: &[DetectorDoc<'_>]) -> String {
    let width = docs.iter().map(|d| d.id.len()).max().unwrap_or(0);
    docs.iter()
        .map(|d| {
            let aliases = if d.aliases.is_empty() {
                String::new()
            } else {
                format!(" (alias: {})", d.aliases.join(", "))
            };
            format!("  {:<width$}  {}{aliases}\n", d.id, d.title)
        })
        .collect()
}

/// `explain ID`: a header line `id: title` (plus `aliases: …`), then the
/// README with its `# ` title dropped, `## ` headings underlined, paragraphs
/// and list items re-wrapped to [`EXPLAIN_WIDTH`] columns, `**` emphasis
/// removed, fenced code blocks and indented lines kept verbatim.
pub fn render_explain(doc: &DetectorDoc<'_>) -> String {
    let mut out = format!("{}: {}\n", doc.id, doc.title);
    if !doc.aliases.is_empty() {
        out.push_str(&format!("aliases: {}\n", doc.aliases.join(", ")));
    }
    out.push('\n');
    out.push_str(&render_markdown_text(doc.markdown, EXPLAIN_WIDTH));
    out
}

/// A block of the README being assembled.
enum Block {
    /// Nothing open.
    None,
    /// A paragraph's words so far.
    Para(String),
    /// A list item: its marker (`- `, `1. `) and words so far.
    Item(String, String),
}

/// Markdown as plain terminal text (see [`render_explain`]); ends with one
/// `\n`, blank lines between blocks.
fn render_markdown_text(md: &str, width: usize) -> String {
    let mut out = String::new();
    let mut block = Block::None;
    let mut fenced = false;
    for line in md.lines() {
        if line.trim_start().starts_with("```") {
            flush(&mut out, &mut block, width);
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let t = line.trim();
        if t.is_empty() {
            flush(&mut out, &mut block, width);
            separate(&mut out);
        } else if t.starts_with("# ") {
            // The title is the header line already.
            flush(&mut out, &mut block, width);
        } else if let Some(h) = t.strip_prefix("## ").or_else(|| t.strip_prefix("### ")) {
            flush(&mut out, &mut block, width);
            separate(&mut out);
            let h = strip_emphasis(h);
            out.push_str(&h);
            out.push('\n');
            out.push_str(&"-".repeat(h.chars().count()));
            out.push('\n');
        } else if let Some(marker) = list_marker(t) {
            flush(&mut out, &mut block, width);
            let rest = t.get(marker.len()..).unwrap_or("").trim_start();
            block = Block::Item(marker.to_string(), strip_emphasis(rest));
        } else if line.starts_with("    ") && matches!(block, Block::None) {
            out.push_str(line);
            out.push('\n');
        } else {
            let words = strip_emphasis(t);
            match &mut block {
                Block::Para(p) | Block::Item(_, p) => {
                    p.push(' ');
                    p.push_str(&words);
                }
                Block::None => block = Block::Para(words),
            }
        }
    }
    flush(&mut out, &mut block, width);
    let trimmed = out.trim_matches('\n');
    let mut s = trimmed.to_string();
    s.push('\n');
    s
}

/// A blank line unless `out` is empty or already ends with one.
fn separate(out: &mut String) {
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
}

/// Write the open block, wrapped.
fn flush(out: &mut String, block: &mut Block, width: usize) {
    match std::mem::replace(block, Block::None) {
        Block::None => {}
        Block::Para(p) => out.push_str(&wrap_words(&p, width, "", "")),
        Block::Item(marker, p) => {
            let indent = " ".repeat(marker.chars().count());
            out.push_str(&wrap_words(&p, width, &marker, &indent));
        }
    }
}

/// `- `, `* ` or `1. ` at the start of `t`.
fn list_marker(t: &str) -> Option<&str> {
    if t.starts_with("- ") || t.starts_with("* ") {
        return t.get(..2);
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && t.get(digits..).is_some_and(|r| r.starts_with(". ")) {
        return t.get(..digits + 2);
    }
    None
}

/// Drop Markdown `**` emphasis.
fn strip_emphasis(s: &str) -> String {
    s.replace("**", "")
}

/// Greedy word wrap of `text` to `width` columns: the first line starts with
/// `first`, the others with `rest`. A word longer than the width gets a line
/// of its own. Ends with `\n`.
fn wrap_words(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut out = String::from(first);
    let mut col = first.chars().count();
    let mut line_empty = true;
    for word in text.split_whitespace() {
        let n = word.chars().count();
        if !line_empty && col + 1 + n > width {
            out.push('\n');
            out.push_str(rest);
            col = rest.chars().count();
            line_empty = true;
        }
        if !line_empty {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += n;
        line_empty = false;
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_paragraphs_lists_and_headings() {
        let md = "# x: T\n\nOne two\nthree four.\n\n## Why\n\n- alpha beta\n  gamma\n- **delta**\n\n```\n  code  kept\n```\n";
        let got = render_markdown_text(md, 12);
        assert_eq!(
            got,
            "One two\nthree four.\n\nWhy\n---\n\n- alpha beta\n  gamma\n- delta\n\n      code  kept\n"
        );
    }

    #[test]
    fn header_and_aliases() {
        let doc = DetectorDoc {
            id: "mss-blackhole",
            aliases: &["pmtu-blackhole"],
            title: "T",
            markdown: "# mss-blackhole: T\n\nText.\n",
        };
        assert_eq!(
            render_explain(&doc),
            "mss-blackhole: T\naliases: pmtu-blackhole\n\nText.\n"
        );
        assert_eq!(
            render_detector_list(&[doc]),
            "  mss-blackhole  T (alias: pmtu-blackhole)\n"
        );
    }

    #[test]
    fn long_words_and_numbered_lists() {
        assert_eq!(
            wrap_words("averyverylongword x", 5, "", ""),
            "averyverylongword\nx\n"
        );
        assert_eq!(list_marker("12. x"), Some("12. "));
        assert_eq!(list_marker("12.x"), None);
    }
}
