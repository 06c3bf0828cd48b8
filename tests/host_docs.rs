//! The README and the pages under `docs/`: every relative link resolves, the
//! README stays short enough to read in five minutes, and the projection
//! page lists every constant of the compare tool's projection.
//!
//! Self-contained (std only): it also builds and runs with plain rustc,
//! `rustc --edition 2021 --test tests/host_docs.rs -o /tmp/host_docs`.

use std::fs;
use std::path::{Path, PathBuf};

const README_MAX_LINES: usize = 200;

/// The repository root: the first directory, walking up from the current
/// one, that holds both `README.md` and `.ci/run`.
fn repo_root() -> PathBuf {
    let start = std::env::current_dir().expect("current directory");
    let mut dir: &Path = &start;
    loop {
        if dir.join("README.md").is_file() && dir.join(".ci/run").is_file() {
            return dir.to_path_buf();
        }
        match dir.parent() {
            Some(parent) => dir = parent,
            None => panic!(
                "no directory holding README.md and .ci/run above {}",
                start.display()
            ),
        }
    }
}

/// Every `*.md` file under `dir`, recursively, sorted.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => panic!("reading {}: {e}", dir.display()),
    };
    let mut paths: Vec<PathBuf> = entries
        .map(|e| e.expect("directory entry").path())
        .collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            markdown_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

/// The text with fenced code blocks and inline code spans blanked out, so
/// that `[a](b)` inside code is not taken for a link.
fn without_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            out.push('\n');
            continue;
        }
        if in_fence {
            out.push('\n');
            continue;
        }
        let mut in_span = false;
        for c in line.chars() {
            if c == '`' {
                in_span = !in_span;
                out.push(' ');
            } else if in_span {
                out.push(' ');
            } else {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The targets of the inline links `[text](target)` and images
/// `![alt](target)` in `text`, with an optional `"title"` removed.
fn link_targets(text: &str) -> Vec<String> {
    let text = without_code(text);
    let bytes = text.as_bytes();
    let mut targets = Vec::new();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b']' && bytes[i + 1] == b'(' {
            let start = i + 2;
            let mut depth = 1;
            let mut j = start;
            while j < bytes.len() && bytes[j] != b'\n' {
                match bytes[j] {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            if j < bytes.len() && bytes[j] == b')' {
                let inner = text[start..j].trim();
                let target = inner
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches('<')
                    .trim_end_matches('>');
                targets.push(target.to_string());
                i = j;
            }
        }
        i += 1;
    }
    targets
}

/// The link's target relative to the linking file, or `None` for a link
/// that is not checked (external, mail, or a pure `#anchor`).
fn local_target(target: &str) -> Option<&str> {
    let lower = target.to_ascii_lowercase();
    if target.is_empty()
        || target.starts_with('#')
        || lower.starts_with("http://")
        || lower.starts_with("https://")
        || lower.starts_with("mailto:")
    {
        return None;
    }
    let path = target.split('#').next().unwrap_or("");
    if path.is_empty() {
        None
    } else {
        Some(path)
    }
}

#[test]
fn readme_and_docs_links_resolve_and_readme_is_short() {
    let root = repo_root();

    let mut files = vec![root.join("README.md")];
    let docs = root.join("docs");
    if docs.is_dir() {
        markdown_files(&docs, &mut files);
    }

    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let base = file.parent().expect("a file has a parent directory");
        for target in link_targets(&text) {
            let Some(path) = local_target(&target) else {
                continue;
            };
            checked += 1;
            if !base.join(path).exists() {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                broken.push(format!("{} -> {}", shown.display(), target));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} of {} relative links in README.md and docs/ do not resolve:\n{}",
        broken.len(),
        checked,
        broken.join("\n")
    );

    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines; keep it to {README_MAX_LINES} and move detail to docs/"
    );
}

/// The README's results table (the code block of its `## Results` section)
/// is read in a terminal and on a phone: no line of it is wider than 100
/// characters, so its columns never wrap into each other.
#[test]
fn the_readme_results_table_fits_100_columns() {
    let readme = fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Results"))
        .expect("README.md has a `## Results` section");
    let mut in_block = false;
    let mut rows = 0;
    for line in section.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            rows += 1;
            let width = line.chars().count();
            assert!(
                width <= 100,
                "a results line is {width} characters wide: {line}"
            );
        }
    }
    assert!(
        rows >= 3,
        "no results table found in the README's Results section"
    );
}

/// The library's examples (README.md, driver/README.md, docs/library.md
/// and every other page under docs/) print an error with its message and
/// exit 1, as a user's program should: a `main` that returns `Result`
/// prints the error's Debug dump instead, and the message's advice (what
/// to run to fix it) is lost (issue 46, item 5).
#[test]
fn library_examples_print_errors_with_their_messages() {
    let root = repo_root();
    let mut files = vec![root.join("README.md"), root.join("driver/README.md")];
    markdown_files(&root.join("docs"), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("docs/library.md")),
        "docs/library.md not found"
    );
    let mut found = Vec::new();
    for file in &files {
        let text =
            fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        for (i, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("fn main()") && l.contains("Result") {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                found.push(format!("{}:{}: {}", shown.display(), i + 1, l));
            }
        }
    }
    assert!(
        found.is_empty(),
        "examples whose `main` returns a Result (an error prints as a Debug dump); \
         use `fn main() {{ if let Err(e) = run() {{ eprintln!(\"error: {{e}}\"); \
         std::process::exit(1); }} }}` as README.md does:\n{}",
        found.join("\n")
    );
}

/// A projection constant as `examples/compare/project.rs` defines it:
/// `pub const NAME: Constant = Constant { value: .., min: .., max: .. };`.
#[derive(Debug)]
struct ProjectionConstant {
    name: String,
    value: f64,
    min: f64,
    max: f64,
}

/// Every `Constant` defined in `project.rs`'s source text.
fn projection_constants(src: &str) -> Vec<ProjectionConstant> {
    let mut out = Vec::new();
    for (i, _) in src.match_indices("pub const ") {
        let rest = &src[i + "pub const ".len()..];
        let Some((name, rest)) = rest.split_once(':') else {
            continue;
        };
        let Some(body) = rest.trim_start().strip_prefix("Constant = Constant {") else {
            continue;
        };
        let body = &body[..body.find('}').expect("a Constant's closing brace")];
        let field = |key: &str| -> f64 {
            body.split(',')
                .filter_map(|f| f.split_once(':'))
                .find(|(k, _)| k.trim() == key)
                .and_then(|(_, v)| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{name}: no numeric `{key}` in {body:?}"))
        };
        out.push(ProjectionConstant {
            name: name.trim().to_string(),
            value: field("value"),
            min: field("min"),
            max: field("max"),
        });
    }
    out
}

/// The cells of every Markdown table row in `text` (`| a | b |` -> `["a", "b"]`).
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with('|') && l.ends_with('|') && l.len() > 1)
        .map(|l| {
            l[1..l.len() - 1]
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// docs/design/projection.md lists every constant of the compare tool's
/// projection (`examples/compare/project.rs`) in its table: a row whose
/// first cell is the constant's name in backticks, with a cell that is its
/// value and a cell that is its range `min–max`, whole cells, as numbers;
/// and the table names no constant the code does not define.
#[test]
fn the_projection_page_lists_every_constant_of_project_rs() {
    let root = repo_root();
    let src = fs::read_to_string(root.join("examples/compare/project.rs")).expect("project.rs");
    let page = fs::read_to_string(root.join("docs/design/projection.md")).expect("projection.md");
    let constants = projection_constants(&src);
    assert!(
        constants.len() >= 8,
        "found only {} constants in project.rs: {constants:?}",
        constants.len()
    );
    let rows = table_rows(&page);
    let number = |cell: &str| cell.parse::<f64>().ok();
    let range = |cell: &str| {
        let (a, b) = cell.split_once('–')?;
        Some((number(a.trim())?, number(b.trim())?))
    };
    for k in &constants {
        let name_cell = format!("`{}`", k.name);
        let row = rows
            .iter()
            .find(|r| r.first() == Some(&name_cell))
            .unwrap_or_else(|| panic!("docs/design/projection.md: no table row for {}", k.name));
        assert!(
            row.iter().any(|c| number(c) == Some(k.value)),
            "docs/design/projection.md: {}'s row has no cell {} (its value in project.rs): {row:?}",
            k.name,
            k.value
        );
        assert!(
            row.iter().any(|c| range(c) == Some((k.min, k.max))),
            "docs/design/projection.md: {}'s row has no cell {}–{} (its range in project.rs): {row:?}",
            k.name,
            k.min,
            k.max
        );
    }
    for row in &rows {
        let Some(name) = row
            .first()
            .and_then(|c| c.strip_prefix('`'))
            .and_then(|c| c.strip_suffix('`'))
        else {
            continue;
        };
        assert!(
            constants.iter().any(|k| k.name == name),
            "docs/design/projection.md lists `{name}`, which project.rs does not define"
        );
    }
}
