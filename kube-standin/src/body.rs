//! Response bodies: a whole JSON document, or a watch stream fed by a task.

use hyper::body::{Bytes, Frame, SizeHint};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

pub(crate) enum Body {
    /// A complete body, sent with a Content-Length.
    Full(Option<Bytes>),
    /// A stream sent with chunked transfer encoding. An `Err` item makes
    /// hyper cut the connection without the final empty chunk, which is
    /// what an API server that dies mid-watch looks like.
    Stream(mpsc::UnboundedReceiver<Result<Bytes, io::Error>>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            Body::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Body::Stream(rx) => rx
                .poll_recv(cx)
                .map(|item| item.map(|chunk| chunk.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Stream(_) => SizeHint::default(),
        }
    }
}
