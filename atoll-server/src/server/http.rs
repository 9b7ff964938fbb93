//! The metrics listener (`metrics-port`, off by default): Prometheus text at `/metrics`, the
//! dashboard's JSON at `/api/stats`, and the dashboard itself at `/` — one self-contained page
//! (`dashboard.html`, no CDN, no build step) that polls `/api/stats`. HTTP/1.1 by `hyper` on
//! the main thread's runtime, beside the acceptors: a scrape never runs on a worker.

use crate::exec::Server;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use std::sync::Arc;

const DASHBOARD: &str = include_str!("dashboard.html");

fn respond(srv: &Server, path: &str) -> Response<Full<Bytes>> {
    let (status, kind, body) = match path {
        "/" | "/index.html" => (StatusCode::OK, "text/html; charset=utf-8", DASHBOARD.to_string()),
        "/metrics" => {
            (StatusCode::OK, "text/plain; version=0.0.4; charset=utf-8", crate::commands::metrics::prometheus(srv))
        }
        "/api/stats" => (StatusCode::OK, "application/json", crate::commands::metrics::stats_json(srv).to_string()),
        _ => (StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "not found\n".to_string()),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(kind));
    r.headers_mut().insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-store"));
    r
}

/// Serves HTTP on `listener` until the process exits (a task of the main thread's LocalSet).
pub async fn serve(listener: tokio::net::TcpListener, srv: Arc<Server>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let srv = srv.clone();
        tokio::task::spawn_local(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let r = respond(&srv, req.uri().path());
                async move { Ok::<_, std::convert::Infallible>(r) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(io, service).await;
        });
    }
}
