//! A command as a list of arguments, and its RESP encoding.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cmd(pub Vec<Vec<u8>>);

impl Cmd {
    pub fn new(name: &str) -> Self {
        Cmd(vec![name.as_bytes().to_vec()])
    }

    pub fn arg(mut self, a: impl AsRef<[u8]>) -> Self {
        self.0.push(a.as_ref().to_vec());
        self
    }

    pub fn args<I, A>(mut self, items: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        self.0.extend(items.into_iter().map(|a| a.as_ref().to_vec()));
        self
    }

    pub fn name(&self) -> &[u8] {
        &self.0[0]
    }

    /// Appends this command, RESP-encoded, to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.push(b'*');
        out.extend_from_slice(self.0.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        for a in &self.0 {
            out.push(b'$');
            out.extend_from_slice(a.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Encodes commands back to back, as one pipeline.
pub fn encode(cmds: &[Cmd]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cmds.iter().map(|c| 16 + c.0.iter().map(|a| a.len() + 16).sum::<usize>()).sum());
    for c in cmds {
        c.encode_into(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_resp_arrays_of_bulk_strings() {
        let c = Cmd::new("RPUSH").arg("k").arg(b"\xffx");
        assert_eq!(encode(&[c]), b"*3\r\n$5\r\nRPUSH\r\n$1\r\nk\r\n$2\r\n\xffx\r\n".to_vec());
    }
}
