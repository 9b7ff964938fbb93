//! An in-process client for unit tests of command functions: an inline line is split as
//! redis-cli would split it and run through [`dispatch`], and the reply bytes come back. (The
//! parser and the session have tests of their own, in `protocol` and `server`.)

use super::client::{Client, ClientHandle};
use super::{dispatch, Server};
use crate::protocol::parser::split_args;
use crate::protocol::Reply;
use std::sync::Arc;

pub struct TestClient {
    pub client: Client,
}

impl TestClient {
    pub fn new(srv: &Server) -> TestClient {
        let h = Arc::new(ClientHandle::new(srv.clients.next_id(), "test:0".into(), String::new(), -1, true, 0));
        TestClient { client: Client::new(h, 0, false) }
    }

    /// Runs one command line; returns its reply as RESP text.
    pub fn run(&mut self, srv: &Server, line: &str) -> String {
        let mut argv = Vec::new();
        assert!(split_args(line.as_bytes(), &mut argv), "unbalanced quotes in {line:?}");
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
        let mut out = Reply::new(self.client.proto);
        self.client.clock = None;
        dispatch(srv, &srv.stats.workers[0], &mut self.client, &args, &mut out);
        String::from_utf8_lossy(&out.buf).into_owned()
    }
}
