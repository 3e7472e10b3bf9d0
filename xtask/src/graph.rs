//! `cargo xtask graph`: the workspace's crate graph and each crate's module graph, drawn from
//! the code itself, with every circle named. A module's arrows are its `crate::` paths, and its
//! calls (on `self`, `tools`) of methods another module lends a type it does not define (the
//! `impl Tools` blocks spread over rl-tools' files; a name lent by one module only). Test code (`tests.rs`,
//! what follows `#[cfg(test)]`) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::Context;

type Graph = BTreeMap<String, BTreeSet<String>>;

pub(crate) fn run(root: &Path) -> anyhow::Result<()> {
    let crates = crate_dirs(root)?;
    let mut graph = Graph::new();
    for (name, dir) in &crates {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("reading {}", dir.display()))?;
        let section = manifest
            .split("\n[")
            .find(|part| part.starts_with("dependencies]"))
            .unwrap_or_default();
        let uses: BTreeSet<String> = section
            .lines()
            .filter_map(|line| line.split(['.', ' ', '=']).next())
            .filter(|dep| crates.contains_key(*dep))
            .map(str::to_owned)
            .collect();
        graph.insert(name.clone(), uses);
    }
    println!("# Crates (an arrow: depends on)\n");
    print_graph(&graph);
    for (name, dir) in &crates {
        let modules = module_graph(&dir.join("src"))?;
        println!("\n# {name}: modules\n");
        print_graph(&modules);
    }
    Ok(())
}

fn print_graph(graph: &Graph) {
    for (node, arrows) in graph {
        let arrows: Vec<&str> = arrows.iter().map(String::as_str).collect();
        println!("{node} -> {}", arrows.join(", "));
    }
    let circles = circles(graph);
    if circles.is_empty() {
        println!("(no circle)");
    }
    for circle in circles {
        println!("CIRCLE: {}", circle.join(" <-> "));
    }
}

/// The workspace's crates by name: the folders of `crates/` and `xtask`.
fn crate_dirs(root: &Path) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut crates = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("crates"))? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file()
            && let Some(name) = path.file_name().and_then(|n| n.to_str())
        {
            crates.insert(name.to_owned(), path);
        }
    }
    crates.insert("xtask".to_owned(), root.join("xtask"));
    Ok(crates)
}

/// A crate's top-level modules and their arrows to one another.
fn module_graph(src: &Path) -> anyhow::Result<Graph> {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    for file in rust_files(src)? {
        let relative = file.strip_prefix(src).unwrap_or(&file);
        let Some(module) = top_module(relative) else {
            continue;
        };
        let text = std::fs::read_to_string(&file)?;
        texts
            .entry(module)
            .or_default()
            .push_str(&without_tests(&text));
    }
    let mut defined: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, text) in &texts {
        for method in lent_methods(text) {
            defined.entry(method).or_default().insert(module.clone());
        }
    }
    let unique: BTreeMap<&str, &str> = defined
        .iter()
        .filter(|(_, modules)| modules.len() == 1)
        .filter_map(|(method, modules)| {
            modules
                .first()
                .map(|module| (method.as_str(), module.as_str()))
        })
        .collect();
    let mut graph = Graph::new();
    for (module, text) in &texts {
        let mut arrows: BTreeSet<String> = crate_paths(text)
            .into_iter()
            .filter(|target| texts.contains_key(target))
            .collect();
        for (method, owner) in &unique {
            // Called on the type's value as such (`self.`, `tools.`), not a like-named method
            // of anything else (`child.wait()`).
            if owner != module
                && ["self.", "tools.", "Self::", "Tools::"]
                    .iter()
                    .any(|on| text.contains(&format!("{on}{method}(")))
            {
                arrows.insert((*owner).to_owned());
            }
        }
        arrows.remove(module);
        graph.insert(module.clone(), arrows);
    }
    Ok(graph)
}

fn rust_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            files.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(files)
}

/// `runs/tests.rs` → `None` (test code); `runs/ending.rs`, `runs.rs` → `runs`; `lib.rs`,
/// `main.rs` → `lib`, `main`.
fn top_module(relative: &Path) -> Option<String> {
    if relative
        .iter()
        .any(|part| part == "tests" || part == "tests.rs")
    {
        return None;
    }
    let first = relative.iter().next()?.to_str()?;
    Some(first.strip_suffix(".rs").unwrap_or(first).to_owned())
}

/// The text before a `#[cfg(test)]`: a file's tests are at its end.
fn without_tests(text: &str) -> String {
    text.split("#[cfg(test)]")
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The methods a module lends a type of another module: the `fn`s of its inherent `impl T`
/// blocks for a `T` it does not define (rl-tools' `impl Tools` spread over its files).
fn lent_methods(text: &str) -> Vec<String> {
    let defines = |name: &str| {
        ["struct ", "enum ", "trait "]
            .iter()
            .any(|kind| text.contains(&format!("{kind}{name}")))
    };
    let mut lent = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("impl") {
            let header = rest.trim_start_matches(|c: char| c != ' ').trim();
            let name: String = header
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            inside = line.ends_with('{') && !header.contains(" for ") && !defines(&name);
            continue;
        }
        if line == "}" {
            inside = false;
            continue;
        }
        if !inside || !line.starts_with("    ") || line.starts_with("        ") {
            continue;
        }
        let rest = line.trim_start();
        let rest = rest
            .strip_prefix("pub(crate) ")
            .or_else(|| rest.strip_prefix("pub "))
            .unwrap_or(rest);
        let rest = rest.strip_prefix("async ").unwrap_or(rest);
        if let Some(name) = rest.strip_prefix("fn ")
            && let Some(end) = name.find(|c: char| !(c.is_alphanumeric() || c == '_'))
        {
            lent.push(name[..end].to_owned());
        }
    }
    lent
}

/// The top-level modules a text names through `crate::` (also inside `use crate::{a, b::c}`).
fn crate_paths(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let word = |rest: &str| -> String {
        rest.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        found.insert(word(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            found.insert(word(rest));
        }
    }
    found
}

/// The strongly connected components of more than one node (Tarjan's algorithm).
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let next = next.as_str();
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    self.on_stack.remove(top);
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_and_nested_crate_paths_are_read() {
        let found = crate_paths("use crate::{a, b::{c, d}, e::F};\nlet x = crate::g::h();");
        let expected: BTreeSet<String> = ["a", "b", "e", "g"].map(str::to_owned).into();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_circle_is_found_and_a_line_is_not() {
        let graph = |edges: &[(&str, &str)]| {
            let mut graph = Graph::new();
            for (from, to) in edges {
                graph
                    .entry((*from).to_owned())
                    .or_default()
                    .insert((*to).to_owned());
                graph.entry((*to).to_owned()).or_default();
            }
            graph
        };
        assert!(circles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
        assert_eq!(
            circles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])),
            vec![vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]]
        );
    }
}
