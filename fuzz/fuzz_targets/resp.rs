//! The RESP reader fed any bytes, cut anywhere: it must never panic, never
//! allocate beyond what the bytes announce and justify (run with
//! `-malloc_limit_mb`, `./dev fuzz` does), and read the same replies (or fail
//! the same way) whether the bytes come all at once or a few at a time.

#![no_main]

use std::io::{self, Read, Write};

use emq_fuzz::Unstructured;
use emq_wire::{Wire, WireResult};
use libfuzzer_sys::fuzz_target;

/// The input's bytes, handed out in reads of sizes drawn from `cuts` (all that
/// fits when `cuts` is empty), then the end of the stream.
struct Cut<'a> {
    data: &'a [u8],
    cuts: &'a [u8],
    turn: usize,
}

impl Read for Cut<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let most = match self.cuts {
            [] => buf.len(),
            cuts => usize::from(cuts[self.turn % cuts.len()] % 17) + 1,
        };
        self.turn += 1;
        let n = most.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

impl Write for Cut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a pipeline's reader makes of the bytes: `n` replies kept, or a
/// transaction's (`exec`: all but the last read past).
fn read(data: &[u8], cuts: &[u8], buffer: usize, n: usize, exec: bool) -> String {
    let mut w = Wire::with_buffer(Cut { data, cuts, turn: 0 }, buffer);
    let got: WireResult<String> = if exec { w.exec_replies(n).map(|r| format!("{r:?}")) } else { w.replies(n).map(|r| format!("{r:?}")) };
    format!("{got:?}")
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let buffer = u.int_in_range(1..=64usize).unwrap_or(16);
    let n = u.int_in_range(1..=6usize).unwrap_or(1);
    let exec = u.arbitrary::<bool>().unwrap_or(false);
    let ncuts = u.int_in_range(1..=16usize).unwrap_or(1);
    let cuts = u.bytes(ncuts).unwrap_or(&[1]);
    let stream = u.take_rest();
    let whole = read(stream, &[], buffer, n, exec);
    let cut = read(stream, cuts, buffer, n, exec);
    assert_eq!(whole, cut, "the same bytes cut otherwise read otherwise");
});
