//! `wasi:io` for a call that may run on a tokio worker ([`super::inline`]).
//! wasmtime-wasi's synchronous bindings wait by `Handle::block_on` on the
//! ambient runtime, which panics on a worker thread: a component that wrote a
//! panic message to stderr would lose its connection instead of getting a 500.
//! These are the same functions, with every blocking one behind
//! [`super::inline::may_block`] (a no-op on a blocking thread), linked over
//! wasmtime-wasi's own.

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::poll::{self, Pollable};
use wasmtime_wasi::p2::bindings::sync::io::streams::{self, InputStream, OutputStream};
use wasmtime_wasi::p2::{StreamError, StreamResult};

use super::inline::may_block;
use super::state::HostState;

/// The call's resource table, seen through these bindings.
pub struct Io<'a>(&'a mut ResourceTable);

struct InlineIo;

impl HasData for InlineIo {
    type Data<'a> = Io<'a>;
}

/// Links these over the `wasi:io/poll` and `wasi:io/streams` already in `linker`.
pub fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    poll::add_to_linker::<HostState, InlineIo>(linker, |s| Io(&mut s.table))?;
    streams::add_to_linker::<HostState, InlineIo>(linker, |s| Io(&mut s.table))?;
    linker.allow_shadowing(false);
    Ok(())
}

impl poll::Host for Io<'_> {
    fn poll(&mut self, pollables: Vec<Resource<Pollable>>) -> wasmtime::Result<Vec<u32>> {
        may_block(|| poll::Host::poll(self.0, pollables))
    }
}

impl poll::HostPollable for Io<'_> {
    fn ready(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<bool> {
        may_block(|| poll::HostPollable::ready(self.0, pollable))
    }
    fn block(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<()> {
        may_block(|| poll::HostPollable::block(self.0, pollable))
    }
    fn drop(&mut self, pollable: Resource<Pollable>) -> wasmtime::Result<()> {
        poll::HostPollable::drop(self.0, pollable)
    }
}

impl streams::Host for Io<'_> {
    fn convert_stream_error(&mut self, err: StreamError) -> wasmtime::Result<streams::StreamError> {
        streams::Host::convert_stream_error(self.0, err)
    }
}

impl streams::HostOutputStream for Io<'_> {
    fn drop(&mut self, stream: Resource<OutputStream>) -> wasmtime::Result<()> {
        may_block(|| streams::HostOutputStream::drop(self.0, stream))
    }
    fn check_write(&mut self, stream: Resource<OutputStream>) -> StreamResult<u64> {
        streams::HostOutputStream::check_write(self.0, stream)
    }
    fn write(&mut self, stream: Resource<OutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        streams::HostOutputStream::write(self.0, stream, bytes)
    }
    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<OutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        may_block(|| streams::HostOutputStream::blocking_write_and_flush(self.0, stream, bytes))
    }
    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<OutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        may_block(|| {
            streams::HostOutputStream::blocking_write_zeroes_and_flush(self.0, stream, len)
        })
    }
    fn subscribe(
        &mut self,
        stream: Resource<OutputStream>,
    ) -> wasmtime::Result<Resource<Pollable>> {
        streams::HostOutputStream::subscribe(self.0, stream)
    }
    fn write_zeroes(&mut self, stream: Resource<OutputStream>, len: u64) -> StreamResult<()> {
        streams::HostOutputStream::write_zeroes(self.0, stream, len)
    }
    fn flush(&mut self, stream: Resource<OutputStream>) -> StreamResult<()> {
        streams::HostOutputStream::flush(self.0, stream)
    }
    fn blocking_flush(&mut self, stream: Resource<OutputStream>) -> StreamResult<()> {
        may_block(|| streams::HostOutputStream::blocking_flush(self.0, stream))
    }
    fn splice(
        &mut self,
        dst: Resource<OutputStream>,
        src: Resource<InputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        streams::HostOutputStream::splice(self.0, dst, src, len)
    }
    fn blocking_splice(
        &mut self,
        dst: Resource<OutputStream>,
        src: Resource<InputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        may_block(|| streams::HostOutputStream::blocking_splice(self.0, dst, src, len))
    }
}

impl streams::HostInputStream for Io<'_> {
    fn drop(&mut self, stream: Resource<InputStream>) -> wasmtime::Result<()> {
        may_block(|| streams::HostInputStream::drop(self.0, stream))
    }
    fn read(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<Vec<u8>> {
        streams::HostInputStream::read(self.0, stream, len)
    }
    fn blocking_read(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<Vec<u8>> {
        may_block(|| streams::HostInputStream::blocking_read(self.0, stream, len))
    }
    fn skip(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<u64> {
        streams::HostInputStream::skip(self.0, stream, len)
    }
    fn blocking_skip(&mut self, stream: Resource<InputStream>, len: u64) -> StreamResult<u64> {
        may_block(|| streams::HostInputStream::blocking_skip(self.0, stream, len))
    }
    fn subscribe(&mut self, stream: Resource<InputStream>) -> wasmtime::Result<Resource<Pollable>> {
        streams::HostInputStream::subscribe(self.0, stream)
    }
}
