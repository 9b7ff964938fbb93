//! The RESP parser against arbitrary bytes, three ways that must agree:
//! 1. the whole input parsed as one buffer, request after request, as the session does;
//! 2. the same bytes arriving in pieces (cut where the input's first byte says), kept and
//!    re-parsed as the session keeps a partial request;
//! 3. the pipeline look-ahead (`scan_request`), wherever it accepts a request, giving the
//!    same length and arguments as the parser.
//! Besides "no panic", the commands seen (arguments, in order) and the final protocol error
//! must be the same whichever way the bytes came.
#![no_main]

use atoll::protocol::parser::{scan_request, ArgSource};
use atoll::protocol::{Limits, Parsed, Parser};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
enum Event {
    Command(Vec<Vec<u8>>),
    Skip,
    Error(&'static str),
}

/// Parses `buf` from `pos` until it needs more bytes; returns the bytes consumed.
fn run(p: &mut Parser, buf: &[u8], limits: &Limits, events: &mut Vec<Event>, check_scan: bool) -> usize {
    let mut pos = 0;
    while pos < buf.len() {
        let idle = !p.in_progress();
        let mut spans: smallvec::SmallVec<[(usize, usize); 8]> = smallvec::SmallVec::new();
        let scanned = if check_scan && idle { scan_request(buf, pos, 8, limits, &mut spans) } else { None };
        match p.parse(&buf[pos..], limits) {
            Parsed::Command { consumed } => {
                let args: Vec<Vec<u8>> = match p.source {
                    ArgSource::Buffer => p.ranges.iter().map(|&(s, e)| buf[pos + s..pos + e].to_vec()).collect(),
                    ArgSource::Inline => p.inline_args.clone(),
                };
                assert!(!args.is_empty(), "a command has a name");
                if let Some(n) = scanned {
                    assert_eq!(n, consumed, "look-ahead length");
                    let seen: Vec<Vec<u8>> = spans.iter().map(|&(s, e)| buf[s..e].to_vec()).collect();
                    assert_eq!(seen, args, "look-ahead arguments");
                }
                assert!(consumed > 0 && pos + consumed <= buf.len());
                events.push(Event::Command(args));
                pos += consumed;
            }
            Parsed::Skip { consumed } => {
                assert!(scanned.is_none(), "look-ahead took what the parser skips");
                assert!(consumed > 0 && pos + consumed <= buf.len());
                events.push(Event::Skip);
                pos += consumed;
            }
            Parsed::Incomplete => {
                assert!(scanned.is_none(), "look-ahead took an incomplete request");
                break;
            }
            Parsed::Error(e) => {
                assert!(scanned.is_none(), "look-ahead took a protocol error");
                events.push(Event::Error(e));
                return buf.len();
            }
        }
    }
    pos
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, input)) = data.split_first() else { return };
    let limits = Limits {
        max_bulk_len: if sel & 1 != 0 { 64 } else { 512 * 1024 * 1024 },
        max_multibulk_len: if sel & 2 != 0 { 16 } else { i32::MAX as i64 },
        max_inline: if sel & 4 != 0 { 32 } else { 64 * 1024 },
        unauthenticated: sel & 8 != 0,
    };
    // 1. Whole.
    let mut whole = Vec::new();
    let mut p = Parser::new();
    run(&mut p, input, &limits, &mut whole, true);
    if whole.last().is_some_and(|e| matches!(e, Event::Error(_))) {
        // Errors depend on what was seen so far (an over-long line is refused once the
        // limit's worth arrived); only the commands before it must agree.
        whole.pop();
    }
    // 2. In pieces of 1..=16 bytes (the selector's high bits), as the session buffers them.
    let step = (sel >> 4) as usize + 1;
    let mut pieces = Vec::new();
    let mut p = Parser::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut failed = false;
    for chunk in input.chunks(step) {
        pending.extend_from_slice(chunk);
        let used = run(&mut p, &pending, &limits, &mut pieces, false);
        if pieces.last().is_some_and(|e| matches!(e, Event::Error(_))) {
            failed = true;
            break;
        }
        pending.drain(..used);
    }
    if failed {
        pieces.pop();
        // The error came at the latest where the whole parse's did.
        assert!(pieces.len() <= whole.len());
        assert_eq!(pieces[..], whole[..pieces.len()]);
    } else {
        assert_eq!(pieces, whole);
    }
});
