use super::*;
use serde_json::json;

#[test]
fn documents_convert_to_json() {
    let docs = parse_documents(
        "a: 1\nb: [x, 'y', 2.5, true, null]\nc: {d: yes}\n---\n---\nkey: \"0123\"\n",
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![
            json!({"a": 1, "b": ["x", "y", 2.5, true, null], "c": {"d": "yes"}}),
            Value::Null,
            json!({"key": "0123"})
        ]
    );
    assert_eq!(parse_documents("").unwrap(), Vec::<Value>::new());
    assert_eq!(
        parse_documents("# only a comment\n").unwrap(),
        Vec::<Value>::new()
    );
}

#[test]
fn scalars_resolve_as_yaml_rust2_does() {
    let docs = parse_documents(
        "i: 0x1f\no: 0o17\np: +5\nf: 1e3\nn: ~\ns: !!str 12\nb: !!bool true\nfl: !!float 2\nt: True\nq: '1'\nk8s: \"on\"\n",
    )
    .unwrap();
    assert_eq!(
        docs,
        vec![
            json!({"i": 31, "o": 15, "p": 5, "f": 1000.0, "n": null, "s": "12", "b": true,
                    "fl": 2.0, "t": true, "q": "1", "k8s": "on"})
        ]
    );
    assert_eq!(
        parse_documents("a: !!int x\n").unwrap_err(),
        "line 1 column 10: \"x\" is not a valid !!int"
    );
    assert!(
        parse_documents("a: .inf\n")
            .unwrap_err()
            .contains("has no JSON form")
    );
    // Mapping keys that are numbers or booleans become their text, as before.
    assert_eq!(
        parse_documents("1: a\ntrue: b\n").unwrap(),
        vec![json!({"1": "a", "true": "b"})]
    );
}

#[test]
fn errors_name_line_and_column() {
    let e = parse_documents("a: 1\nb: [1, 2\n").unwrap_err();
    assert!(e.starts_with("line 3 column 1: "), "{e}");
    let e = parse_documents("a: 1\n? [x]\n: y\n").unwrap_err();
    assert_eq!(e, "line 2 column 5: unsupported mapping key [\"x\"]");
    let e = parse_documents("a: *nowhere\n").unwrap_err();
    assert!(e.starts_with("line 1 column 4: "), "{e}");
}

#[test]
fn small_aliases_still_resolve() {
    assert_eq!(
        parse_documents("a: &x 1\nb: *x\nc: &m {k: [1, 2]}\nd: *m\n").unwrap(),
        vec![json!({"a": 1, "b": 1, "c": {"k": [1, 2]}, "d": {"k": [1, 2]}})]
    );
    // Anchors do not carry over into the next document.
    assert!(parse_documents("a: &x 1\n---\nb: *x\n").is_err());
}

/// The "billion laughs": nine levels of nine aliases each, 577 bytes that YamlLoader
/// expands to 9^9 strings (gigabytes). Refused as soon as the count passes the limit,
/// naming the line of the alias that crossed it.
#[test]
fn alias_bomb_is_refused_without_expanding() {
    let mut text = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        text.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    assert!(text.len() < 600, "{}", text.len());
    let started = std::time::Instant::now();
    let e = parse_documents(&text).unwrap_err();
    assert!(
        e.contains("aliases expand to more than 100000 nodes: refusing to expand"),
        "{e}"
    );
    // Level f (9 aliases of the 66,430 nodes of level e) is the first that cannot fit.
    assert!(e.starts_with("line 6 column "), "{e}");
    // A bound on work, not a timing assert: far less than one expansion's worth.
    let _ = started;
    // The same shape one level less deep is fine: real files that use aliases keep
    // working.
    let small: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    let v = parse_documents(&small).unwrap();
    assert_eq!(v[0]["e"].as_array().unwrap().len(), 9);
}

#[test]
fn alias_limit_and_node_limit_are_separate() {
    let limits = Limits {
        max_depth: 64,
        max_nodes: 100,
        max_alias_nodes: 5,
    };
    // 4 aliases of a 1-node anchor, then one of a 3-node anchor: 7 copies > 5.
    assert!(parse_documents_with("a: &x 1\nb: [*x, *x, *x, *x]\n", limits).is_ok());
    let e = parse_documents_with("a: &x 1\nm: &m [1, 2]\nb: [*x, *x, *x, *x, *m]\n", limits)
        .unwrap_err();
    assert!(e.contains("aliases expand to more than 5 nodes"), "{e}");
}

#[test]
fn node_limit_counts_plain_nodes_too() {
    let limits = Limits {
        max_depth: 64,
        max_nodes: 10,
        max_alias_nodes: 10,
    };
    // A mapping (1) + 4 keys + 4 values = 9 nodes.
    assert!(parse_documents_with("{a: 1, b: 2, c: 3, d: 4}", limits).is_ok());
    let e = parse_documents_with("{a: 1, b: 2, c: 3, d: 4, e: 5}", limits).unwrap_err();
    assert!(e.contains("more than 10 nodes"), "{e}");
    // The limit is per stream, across documents.
    let e = parse_documents_with("[1, 2, 3, 4]\n---\n[5, 6, 7, 8, 9]\n", limits).unwrap_err();
    assert!(e.starts_with("line 3 column "), "{e}");
}

fn nested_block(depth: usize) -> String {
    let mut s = String::new();
    for i in 0..depth {
        s.push_str(&" ".repeat(i));
        s.push_str("k:\n");
    }
    s.push_str(&" ".repeat(depth));
    s.push_str("v\n");
    s
}

#[test]
fn depth_is_capped_at_64() {
    // 64 mappings, the innermost holding a scalar.
    let ok = nested_block(64);
    let v = parse_documents(&ok).unwrap();
    let mut cur = &v[0];
    for _ in 0..64 {
        cur = &cur["k"];
    }
    assert_eq!(cur, &json!("v"));
    let e = parse_documents(&nested_block(65)).unwrap_err();
    assert!(e.contains("nested more than 64 levels deep"), "{e}");
    assert!(e.starts_with("line 65 column "), "{e}");
    let e = parse_documents(&format!("{}{}", "[".repeat(65), "]".repeat(65))).unwrap_err();
    assert!(e.contains("nested more than 64 levels deep"), "{e}");
    // An alias counts the depth of what it refers to.
    let limits = Limits {
        max_depth: 4,
        max_nodes: 100,
        max_alias_nodes: 100,
    };
    assert!(parse_documents_with("a: &x [[1]]\nb: [*x]\n", limits).is_ok());
    let e = parse_documents_with("a: &x [[1]]\nb: [[*x]]\n", limits).unwrap_err();
    assert!(e.contains("nested more than 4 levels deep"), "{e}");
}

/// 5,000 levels in a few KB used to overflow the stack of the thread reading them
/// (`Parser::load` recurses per level). On a 64 KiB stack, block and flow style.
#[test]
fn deep_nesting_cannot_overflow_the_stack() {
    let block = nested_block(5000);
    let flow = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let mixed = "- ".repeat(5000) + "x\n";
    let t = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            [block, flow, mixed]
                .iter()
                .map(|t| parse_documents(t).is_err())
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(t.join().unwrap(), vec![true, true, true]);
}
