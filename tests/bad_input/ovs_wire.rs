//! Garbage and oversized bytes from Open vSwitch: OVSDB JSON-RPC and OpenFlow messages.

use super::*;

// ---------------------------------------------------------------------------------------
// OVSDB JSON-RPC bytes

#[test]
fn garbage_and_oversized_ovsdb() {
    let good = br#"{"id":1,"result":{},"error":null}"#;
    type Check = fn(&[Value], OvsdbError);
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("ovsdb-array-not-object", b"[1,2]".to_vec(), |_, e| {
            assert_eq!(
                e,
                OvsdbError::Protocol("expected '{' to start a message, got byte 0x5b".into())
            );
        }),
        (
            "ovsdb-http-response",
            b"HTTP/1.1 400 Bad Request\r\n".to_vec(),
            |_, e| {
                assert_eq!(
                    e,
                    OvsdbError::Protocol("expected '{' to start a message, got byte 0x48".into())
                );
            },
        ),
        ("ovsdb-nul-byte", vec![0], |_, e| {
            assert_eq!(
                e,
                OvsdbError::Protocol("expected '{' to start a message, got byte 0x00".into())
            );
        }),
        (
            "ovsdb-mismatched-brackets",
            b"{\"id\":1]".to_vec(),
            |_, e| {
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.starts_with("invalid JSON message: ")),
                    "{e:?}"
                );
            },
        ),
        (
            "ovsdb-invalid-json-inside",
            b"{\"id\":,}".to_vec(),
            |_, e| {
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.starts_with("invalid JSON message: ")),
                    "{e:?}"
                );
            },
        ),
        (
            "ovsdb-oversized-unfinished",
            {
                let mut v = b"{\"id\":1,\"result\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'a', 5000));
                v
            },
            |_, e| assert_eq!(e, OvsdbError::Oversize { limit: 4096 }),
        ),
        (
            "ovsdb-oversized-complete",
            {
                let mut v = b"{\"id\":1,\"result\":\"".to_vec();
                v.extend(std::iter::repeat_n(b'a', 5000));
                v.extend(b"\"}");
                v
            },
            |_, e| assert_eq!(e, OvsdbError::Oversize { limit: 4096 }),
        ),
        (
            "ovsdb-deep-nesting",
            {
                let mut v = b"{\"a\":".to_vec();
                v.extend(std::iter::repeat_n(b'[', 1000));
                v.extend(std::iter::repeat_n(b']', 1000));
                v.push(b'}');
                v
            },
            |_, e| {
                // serde_json's recursion limit (128) turns it into an error, not a stack overflow.
                assert!(
                    matches!(&e, OvsdbError::Protocol(m) if m.contains("recursion limit")),
                    "{e:?}"
                );
            },
        ),
    ];
    run_table(
        "ovsdb framer",
        &cases,
        |c| c.0.to_string(),
        |(_, bytes, check)| {
            // A good message first: delivered before the garbage poisons the stream.
            let mut f = Framer::new(4096);
            f.push(good);
            f.push(b"\n");
            f.push(bytes);
            let mut got = Vec::new();
            let err = loop {
                match f.next_message() {
                    Ok(Some(v)) => got.push(v),
                    Ok(None) => panic!("no error; messages {got:?}"),
                    Err(e) => break e,
                }
            };
            assert_eq!(got, vec![json!({"id":1,"result":{},"error":null})]);
            check(&got, err);
        },
    );

    // Datum decoding: each bad datum names what it is; a row's other columns are unaffected.
    let datums: Vec<(&str, Value, &str)> = vec![
        (
            "datum-set-not-a-list",
            json!(["set", 5]),
            "ovsdb datum: not an atom: [\"set\",5]",
        ),
        (
            "datum-map-pair-of-one",
            json!(["map", [["k"]]]),
            "ovsdb datum: not a map pair: [\"k\"]",
        ),
        (
            "datum-map-not-pairs",
            json!(["map", [5]]),
            "ovsdb datum: not a map pair: 5",
        ),
        (
            "datum-uuid-garbage",
            json!(["uuid", "not-a-uuid"]),
            "not-a-uuid",
        ),
        (
            "datum-object",
            json!({"a": 1}),
            "ovsdb datum: not an atom: {\"a\":1}",
        ),
        ("datum-null", Value::Null, "ovsdb datum: not an atom: null"),
        (
            "datum-set-of-sets",
            json!(["set", [["set", []]]]),
            "ovsdb datum: not an atom: [\"set\",[]]",
        ),
    ];
    run_table(
        "ovsdb datum",
        &datums,
        |c| c.0.to_string(),
        |(_, v, want)| {
            let e = Datum::from_json(v).unwrap_err().to_string();
            assert!(e.contains(want), "{e:?} lacks {want:?}");
            assert_eq!(
                Datum::from_json(&json!(["set", ["a", 1]])).unwrap(),
                Datum::Set(vec![Atom::str("a"), Atom::Integer(1)])
            );
        },
    );
}

// ---------------------------------------------------------------------------------------
// OpenFlow messages

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn garbage_and_oversized_openflow() {
    // Header checks done before the body is read.
    let heads: Vec<(&str, [u8; 8], WireError)> = vec![
        (
            "of-length-below-header",
            [6, 0, 0, 4, 0, 0, 0, 1],
            WireError::BadLength {
                what: "message header",
                len: 4,
            },
        ),
        (
            "of-length-zero",
            [6, 2, 0, 0, 0, 0, 0, 1],
            WireError::BadLength {
                what: "message header",
                len: 0,
            },
        ),
        (
            "of-version-zero",
            [0, 0, 0, 8, 0, 0, 0, 1],
            WireError::WrongVersion {
                what: "message header",
                version: 0,
            },
        ),
        (
            "of-version-7",
            [7, 0, 0, 8, 0, 0, 0, 1],
            WireError::WrongVersion {
                what: "message header",
                version: 7,
            },
        ),
        (
            "of-http-text",
            *b"HTTP/1.1",
            WireError::WrongVersion {
                what: "message header",
                version: b'H',
            },
        ),
    ];
    run_table(
        "openflow headers",
        &heads,
        |c| c.0.to_string(),
        |(_, h, want)| {
            assert_eq!(Msg::frame_len(h).unwrap_err(), *want);
            assert_eq!(Msg::frame_len(&[6, 2, 0, 8, 0, 0, 0, 1]).unwrap(), 8);
        },
    );

    // Whole messages that must be refused with an error (never a panic).
    let echo_ok = hex("06 02 00 08 00 00 00 07");
    let mut oversized = vec![6, 2, 0xff, 0xff, 0, 0, 0, 1];
    oversized.resize(70_000, 0xab);
    let msgs: Vec<(&str, Vec<u8>, &str)> = vec![
        ("of-empty", vec![], "truncated"),
        ("of-header-cut", hex("06 02 00"), "truncated"),
        ("of-length-says-more", hex("06 02 00 10 00 00 00 01"), ""),
        (
            "of-length-says-less",
            hex("06 02 00 08 00 00 00 01 aa bb"),
            "",
        ),
        ("of-oversized-buffer", oversized, ""),
        (
            "of-features-reply-short",
            hex("06 06 00 0c 00 00 00 01 00 00 00 00"),
            "truncated",
        ),
        (
            "of-port-status-short",
            hex("06 0c 00 10 00 00 00 01 00 00 00 00 00 00 00 00"),
            "truncated",
        ),
        (
            "of-error-short",
            hex("06 01 00 0a 00 00 00 01 00 01"),
            "truncated",
        ),
        (
            "of-hello-element-len-zero",
            hex("06 00 00 10 00 00 00 01 00 01 00 00 00 00 00 00"),
            "",
        ),
        (
            "of-hello-element-len-huge",
            hex("06 00 00 10 00 00 00 01 00 01 00 ff 00 00 00 12"),
            "",
        ),
        (
            "of-multipart-reply-short",
            hex("06 13 00 0c 00 00 00 01 00 0d 00 00"),
            "",
        ),
        (
            "of-port-desc-port-len-bad",
            hex("06 13 00 18 00 00 00 01 00 0d 00 00 00 00 00 00 00 00 00 01 00 02 00 00"),
            "",
        ),
    ];
    run_table(
        "openflow messages",
        &msgs,
        |c| c.0.to_string(),
        |(_, bytes, want)| {
            let e = Msg::decode(bytes).expect_err("garbage decoded");
            assert!(e.to_string().contains(want), "{e} lacks {want:?}");
            // The next message on the stream is unaffected.
            let ok = Msg::decode(&echo_ok).unwrap();
            assert_eq!(ok.xid, 7);
        },
    );
}
