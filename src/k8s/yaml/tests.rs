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
    // Level e (9 aliases of the 7,381 units of level d: 66,429) is the last that fits.
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
fn node_limit_counts_plain_nodes_and_mappings() {
    let limits = Limits {
        max_depth: 64,
        max_nodes: 30,
        max_alias_nodes: 30,
    };
    // A mapping (16) + 4 keys + 4 values = 24 units.
    assert!(parse_documents_with("{a: 1, b: 2, c: 3, d: 4}", limits).is_ok());
    let e = parse_documents_with("{a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}", limits)
        .unwrap_err();
    assert!(
        e.contains("more than 30 node units (a mapping counts 16, aliases what they refer to)"),
        "{e}"
    );
    // A sequence is 1 unit, so 29 scalars fit in one.
    let seq = format!("[{}]", vec!["1"; 29].join(","));
    assert!(parse_documents_with(&seq, limits).is_ok());
    // The limit is per stream, across documents.
    let e = parse_documents_with(&format!("{seq}\n---\n[5]\n"), limits).unwrap_err();
    assert!(e.starts_with("line 3 column "), "{e}");
    // Small mappings are what costs memory: a sequence of 2,000 one-entry maps is
    // 1 + 2,000 × 18 = 36,001 units.
    let maps = format!("[{}]", vec!["{a: 1}"; 2000].join(","));
    let limits = Limits {
        max_nodes: 36_001,
        ..LIMITS
    };
    assert!(parse_documents_with(&maps, limits).is_ok());
    let limits = Limits {
        max_nodes: 36_000,
        ..LIMITS
    };
    assert!(parse_documents_with(&maps, limits).is_err());
}

/// JSON manifests get the same bounds: serde_json alone would build millions of maps from
/// a few MB of `{"a":1},`, and nests 128 deep.
#[test]
fn json_is_bounded_the_same_way() {
    assert_eq!(
        parse_json(r#"{"a": [1, "x", true, null, 2.5], "b": {}}"#, LIMITS).unwrap(),
        json!({"a": [1, "x", true, null, 2.5], "b": {}})
    );
    let limits = Limits {
        max_nodes: 36_001,
        ..LIMITS
    };
    let maps = format!("[{}]", vec![r#"{"a":1}"#; 2000].join(","));
    assert!(parse_json(&maps, limits).is_ok());
    let e = parse_json(&format!("[{}]", vec![r#"{"a":1}"#; 2001].join(",")), limits).unwrap_err();
    assert!(e.starts_with("line 1 column "), "{e}");
    assert!(e.contains("more than 36001 node units"), "{e}");
    let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
    assert!(parse_json(&ok, LIMITS).is_ok());
    let e = parse_json(&format!("{}{}", "[".repeat(65), "]".repeat(65)), LIMITS).unwrap_err();
    assert!(e.contains("nested more than 64 levels deep"), "{e}");
    let e = parse_json("{\n\"a\": [1,\n}", LIMITS).unwrap_err();
    assert!(e.starts_with("line 3 column 1: "), "{e}");
    assert!(parse_json("{} x", LIMITS).is_err(), "trailing characters");
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
