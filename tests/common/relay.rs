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

/// The test API server (listening on 127.0.0.1 of the test's namespace at `server_url`)
/// reachable from `ns` as `http://127.0.0.1:16443`, and a kubeconfig for it in `dir`
/// (bearer `token` when given). Dropping it stops both relays.
pub struct ApiInNetns {
    _outer: Relay,
    _inner: Relay,
    pub kubeconfig: std::path::PathBuf,
}

impl ApiInNetns {
    pub fn new(
        ns: &Netns,
        dir: &std::path::Path,
        server_url: &str,
        token: Option<&str>,
    ) -> ApiInNetns {
        let port = server_url
            .rsplit(':')
            .next()
            .map(|p| p.trim_end_matches('/'))
            .expect("server url with a port");
        let sock = dir.join("api.sock");
        let outer = Relay::start(
            None,
            &format!("unix:{}", sock.display()),
            &format!("tcp:{port}"),
        );
        let inner = Relay::start(Some(ns), "tcp:16443", &format!("unix:{}", sock.display()));
        let user = match token {
            Some(t) => format!("{{token: {t}}}"),
            None => "{}".to_string(),
        };
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\ncurrent-context: vm\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:16443'}}\nusers:\n- name: node\n  user: {user}\ncontexts:\n- name: vm\n  context: {{cluster: c, user: node}}\n"
            ),
        )
        .expect("write kubeconfig");
        ApiInNetns {
            _outer: outer,
            _inner: inner,
            kubeconfig,
        }
    }
}
