//! A byte relay between a TCP port and a unix socket, to reach a server in one network
//! namespace from another (path-based unix sockets work across namespaces): the test API
//! server listens on 127.0.0.1 of the test's namespace, tether runs in a sandbox's.

use std::process::{Child, Stdio};

use super::Netns;

/// Debian's python3 (a dependency of openvswitch-switch).
const PY: &str = "/usr/bin/python3";

/// A byte relay: `python3` copying both ways between each accepted connection and a new
/// connection to `to`. `listen`/`to` are `tcp:<port>` (127.0.0.1) or `unix:<path>`.
pub const RELAY: &str = "import socket,sys,threading
def sock(spec):
    kind,arg=spec.split(':',1)
    if kind=='tcp':
        return socket.socket(socket.AF_INET),('127.0.0.1',int(arg))
    return socket.socket(socket.AF_UNIX),arg
def pipe(a,b):
    try:
        while True:
            d=a.recv(65536)
            if not d: break
            b.sendall(d)
    except OSError: pass
    for s in (a,b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
ls,addr=sock(sys.argv[1])
ls.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
ls.bind(addr)
ls.listen(64)
print('ready',flush=True)
while True:
    c,_=ls.accept()
    u,to=sock(sys.argv[2])
    try: u.connect(to)
    except OSError:
        c.close(); continue
    threading.Thread(target=pipe,args=(c,u),daemon=True).start()
    threading.Thread(target=pipe,args=(u,c),daemon=True).start()";

pub struct Relay(Child);

impl Relay {
    pub fn start(ns: Option<&Netns>, listen: &str, to: &str) -> Relay {
        let argv = [PY, "-c", RELAY, listen, to];
        let mut c = match ns {
            Some(ns) => ns.command(&argv),
            None => {
                let mut c = std::process::Command::new(PY);
                c.args(&argv[1..]);
                c
            }
        };
        let mut child = c
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn python3 relay");
        let mut out = std::io::BufReader::new(child.stdout.take().expect("relay stdout"));
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).expect("relay ready line");
        assert_eq!(line.trim(), "ready");
        Relay(child)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
