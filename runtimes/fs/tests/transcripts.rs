//! The ```console blocks of the READMEs are real sessions, and this test keeps them so.
//!
//! Each block of `README.md` (the workspace's) and `runtimes/fs/README.md` runs in a
//! fresh temporary directory, which is the working directory of every command, so
//! `--data-dir data` names a directory inside it. A block is a list of steps: a line
//! `$ COMMAND` (continued on the next line when it ends with `\`) and the lines up to the
//! next `$`, which are what the command prints, standard output and standard error
//! merged in the order they were written (as a terminal shows them). A command is one of
//!
//! - `broker-fs ARGS...`: the binary this crate builds;
//! - `printf 'TEXT' | broker-fs ARGS...` or `echo 'TEXT' | broker-fs ARGS...`: the same
//!   with TEXT on standard input (`printf` knows only the escapes `\n`, `\t`, `\\`);
//! - `ls DIR`: the entries of DIR, one a line, in byte order (as `LC_ALL=C ls` prints).
//!
//! Anything else fails the test: a session that cannot run here (a `kill -9`, a second
//! terminal) belongs in a ```text block, with a sentence saying why.
//!
//! Before comparing, both the block and the real output are masked, without regexes:
//!
//! - a number of seconds (`3.0 s`, `60 s`: a number, a space, `s`) becomes `… s`, as
//!   time left and time waited depend on how fast the machine is;
//! - `(pid N)` becomes `(pid …)`;
//! - the temporary directory's path, wherever it is printed, becomes `.`;
//! - in the block, `…` stands for any text (possibly none) within its line.
//!
//! Topic ids, offsets, partitions, counts and journal epochs are compared as they are: in
//! a fresh directory they are the same on every run.
//!
//! `BROKER_FS_BLESS_TRANSCRIPTS=1 cargo test -p broker-fs --test transcripts` rewrites the
//! blocks with the output of this run (command lines kept as they are) instead of
//! comparing; check the diff before committing it.

mod common;

use common::{TempDir, BIN};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One `$ COMMAND` of a block and the lines the block says it prints.
struct Step {
    /// The command as the block writes it: one line, or several joined by `\`.
    raw: Vec<String>,
    /// The command with its continuation lines joined.
    command: String,
    expected: Vec<String>,
}

/// A ```console block: where it is, and its steps.
struct Block {
    /// The line number (from 1) of its opening fence.
    fence_line: usize,
    /// The 0-based line range of its body (between the fences).
    body: std::ops::Range<usize>,
    steps: Vec<Step>,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every ```console block of `text`.
fn console_blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_end() != "```console" {
            i += 1;
            continue;
        }
        let fence = i;
        let start = i + 1;
        let mut end = start;
        while end < lines.len() && !lines[end].starts_with("```") {
            end += 1;
        }
        assert!(end < lines.len(), "{file}:{}: a ```console block that never closes", fence + 1);
        let mut steps: Vec<Step> = Vec::new();
        let mut j = start;
        while j < end {
            let line = lines[j];
            if let Some(first) = line.strip_prefix("$ ") {
                let mut raw = vec![line.to_string()];
                let mut command = first.to_string();
                while command.ends_with('\\') && j + 1 < end {
                    command.pop();
                    j += 1;
                    raw.push(lines[j].to_string());
                    command = format!("{} {}", command.trim_end(), lines[j].trim());
                }
                steps.push(Step { raw, command, expected: Vec::new() });
            } else {
                match steps.last_mut() {
                    Some(step) => step.expected.push(line.to_string()),
                    None => panic!("{file}:{}: output before the first `$ ` command of the block", j + 1),
                }
            }
            j += 1;
        }
        blocks.push(Block { fence_line: fence + 1, body: start..end, steps });
        i = end + 1;
    }
    blocks
}

/// Splits a command line into words: blanks separate them, '...' is literal, "..." knows
/// the escapes `\"` and `\\`, and a `|` on its own is a word.
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => panic!("unclosed ' in `{command}`"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => panic!("unclosed \" in `{command}`"),
                        },
                        Some(c) => word.push(c),
                        None => panic!("unclosed \" in `{command}`"),
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// `printf`'s format, for the escapes a transcript uses.
fn printf_text(format: &str) -> String {
    assert!(!format.contains('%'), "printf: only plain text and \\n, \\t, \\\\ are supported: {format:?}");
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\\') => out.push('\\'),
            other => panic!("printf: unsupported escape \\{other:?} in {format:?}"),
        }
    }
    out
}

/// Runs `broker-fs ARGS` in `cwd` with `stdin`; returns standard output and standard
/// error through one pipe, so in the order the process wrote them.
fn run_broker_fs(cwd: &Path, args: &[String], stdin: &str) -> String {
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let mut child = {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(writer.try_clone().expect("clone pipe"))
            .stderr(writer);
        cmd.spawn().expect("spawn broker-fs")
        // `cmd`, and with it the parent's copies of the pipe's write end, drops here, so
        // the read below ends when the child exits.
    };
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let mut out = Vec::new();
    reader.read_to_end(&mut out).unwrap();
    child.wait().unwrap();
    String::from_utf8(out).expect("broker-fs printed UTF-8")
}

/// Runs one step's command in `cwd`; returns what it prints.
fn run(cwd: &Path, command: &str) -> String {
    let words = words(command);
    let stages: Vec<&[String]> = words.split(|w| w == "|").collect();
    let cannot = || -> ! {
        panic!(
            "cannot run `{command}`: a ```console block may use only `broker-fs ...`, `printf '...' | broker-fs ...`, \
             `echo '...' | broker-fs ...` and `ls DIR`; make it a ```text block and say why it cannot run"
        )
    };
    let (stdin, last) = match stages.as_slice() {
        [only] => (String::new(), *only),
        [first, last] => {
            let stdin = match first.split_first() {
                Some((p, [format])) if p == "printf" => printf_text(format),
                Some((e, text)) if e == "echo" && !text.is_empty() => format!("{}\n", text.join(" ")),
                _ => cannot(),
            };
            (stdin, *last)
        }
        _ => cannot(),
    };
    match last.split_first() {
        Some((b, args)) if b == "broker-fs" => run_broker_fs(cwd, args, &stdin),
        Some((l, [dir])) if l == "ls" && stdin.is_empty() => {
            let mut names: Vec<String> = std::fs::read_dir(cwd.join(dir))
                .unwrap_or_else(|e| panic!("`{command}`: {e}"))
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            names.sort();
            names.iter().map(|n| format!("{n}\n")).collect()
        }
        _ => cannot(),
    }
}

/// Masks what changes from run to run (see the module's documentation).
fn mask(line: &str, temp: &str) -> String {
    let line = line.replace(temp, ".");
    // "(pid 1234)" -> "(pid …)"
    let mut out = String::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("(pid ") {
        out.push_str(&rest[..at + 5]);
        rest = &rest[at + 5..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && rest[digits..].starts_with(')') {
            out.push('…');
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    // "3.0 s" -> "… s": a number (digits, at most one '.') that starts a word and is
    // followed by " s" that ends one.
    let chars: Vec<char> = out.chars().collect();
    let mut masked = String::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '.');
        if starts_word && chars[i].is_ascii_digit() {
            let mut j = i;
            let mut dots = 0;
            while j < chars.len() && (chars[j].is_ascii_digit() || (chars[j] == '.' && dots == 0)) {
                dots += usize::from(chars[j] == '.');
                j += 1;
            }
            let number_end = if chars[j - 1] == '.' { j - 1 } else { j };
            let unit = chars.get(number_end) == Some(&' ') && chars.get(number_end + 1) == Some(&'s');
            let unit_ends = chars.get(number_end + 2).is_none_or(|c| !c.is_alphanumeric());
            if unit && unit_ends {
                masked.push('…');
            } else {
                masked.extend(&chars[i..number_end]);
            }
            i = number_end;
            continue;
        }
        masked.push(chars[i]);
        i += 1;
    }
    masked
}

/// Whether `actual` matches `expected`, where each `…` of `expected` stands for any text.
fn matches(expected: &str, actual: &str) -> bool {
    let pieces: Vec<&str> = expected.split('…').collect();
    if pieces.len() == 1 {
        return expected == actual;
    }
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() || !actual.ends_with(last) {
        return false;
    }
    let mut rest = &actual[first.len()..actual.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Runs every ```console block of the README at `rel` (from the repository root) and
/// compares it with what the commands print now; or rewrites the blocks when blessing.
fn check_readme(rel: &str) {
    let path = repo_root().join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let blocks = console_blocks(rel, &text);
    assert!(!blocks.is_empty(), "{rel} has no ```console block");
    let bless = std::env::var_os("BROKER_FS_BLESS_TRANSCRIPTS").is_some_and(|v| v == "1");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut failures = Vec::new();
    // Backwards, so that a rewritten block leaves the line numbers of earlier ones alone.
    for block in blocks.iter().rev() {
        let tmp = TempDir::new("transcript");
        let temp = tmp.path().to_str().unwrap().to_string();
        let mut fresh = Vec::new();
        let mut mismatch = None;
        let mut line_no = block.body.start + 1;
        for step in &block.steps {
            let output = run(tmp.path(), &step.command);
            let actual: Vec<String> = output.lines().map(|l| l.replace(&temp, ".")).collect();
            fresh.extend(step.raw.iter().cloned());
            fresh.extend(actual.iter().cloned());
            line_no += step.raw.len();
            if mismatch.is_none() {
                let n = step.expected.len().max(actual.len());
                for k in 0..n {
                    let want = step.expected.get(k).map(|l| mask(l, &temp));
                    let got = actual.get(k).map(|l| mask(l, &temp));
                    let same = match (&want, &got) {
                        (Some(w), Some(g)) => matches(w, g),
                        _ => false,
                    };
                    if !same {
                        mismatch = Some(format!(
                            "{rel}:{}: after `$ {}`\n  the block says: {}\n  broker-fs says: {}",
                            line_no + k,
                            step.command,
                            step.expected.get(k).map_or("(nothing more)", String::as_str),
                            actual.get(k).map_or("(nothing more)", String::as_str),
                        ));
                        break;
                    }
                }
            }
            line_no += step.expected.len();
        }
        if bless {
            lines.splice(block.body.clone(), fresh);
        } else if let Some(m) = mismatch {
            failures.push(format!(
                "{m}\nthe block of {rel}:{} as it runs now:\n```console\n{}\n```",
                block.fence_line,
                fresh.join("\n")
            ));
        }
    }
    if bless {
        let mut out = lines.join("\n");
        out.push('\n');
        if out != text {
            std::fs::write(&path, out).unwrap();
        }
        return;
    }
    assert!(
        failures.is_empty(),
        "a ```console block no longer matches what broker-fs prints (fix the block, or run with \
         BROKER_FS_BLESS_TRANSCRIPTS=1 and check the diff):\n\n{}",
        failures.join("\n\n")
    );
}

#[test]
fn workspace_readme_sessions_are_real() {
    check_readme("README.md");
}

#[test]
fn broker_fs_readme_sessions_are_real() {
    check_readme("runtimes/fs/README.md");
}

#[test]
fn masking_and_placeholders() {
    let t = "TEMP/broker-fs-test-transcript-1";
    assert_eq!(mask("waits in its grace delay, 2.9 s left", t), "waits in its grace delay, … s left");
    assert_eq!(mask("giving up in 60 s unless", t), "giving up in … s unless");
    assert_eq!(mask("3 partitions, 10 s.", t), "3 partitions, … s.");
    assert_eq!(mask("grace 3000 ms", t), "grace 3000 ms");
    assert_eq!(mask("v1.5 s", t), "v1.5 s");
    assert_eq!(mask("locked by another process (pid 4242)", t), "locked by another process (pid …)");
    assert_eq!(mask("cannot open TEMP/broker-fs-test-transcript-1/data/journal", t), "cannot open ./data/journal");
    assert!(matches("recovered data (journal epoch …)", "recovered data (journal epoch 12)"));
    assert!(matches("… of 3 logs …", "0 of 3 logs removed"));
    assert!(!matches("… of 3 logs", "0 of 4 logs"));
    assert!(!matches("a…a", "a"));
    assert_eq!(
        words(r#"printf 'a\nb' | broker-fs --data-dir "d d" x"#),
        ["printf", r"a\nb", "|", "broker-fs", "--data-dir", "d d", "x"]
    );
    assert_eq!(printf_text(r"a\nb\n"), "a\nb\n");
}
