//! `tether check`: NetworkPolicy's source, when `antreaKubeconfig` is set: the kubeconfig
//! loads, the antrea-controller answers a watch of each of the three kinds in this VM's
//! span (the RBAC verb the daemon needs, tried for real: one line read, then closed), and
//! what turning NetworkPolicy on does to the bridge.

use super::*;
use crate::controlplane::{Kind as CpKind, SourceConfig};

pub(super) fn check_controlplane(cfg: &Config, out: &mut Vec<Finding>) {
    let Some(path) = &cfg.antrea_kubeconfig else {
        return;
    };
    let client = match crate::wiring::controlplane_client(cfg) {
        Ok(c) => c,
        Err(e) => {
            out.push(bad(
                Level::Fail,
                "networkpolicy credentials",
                format!("antreaKubeconfig {}: {e}", path.display()),
                "point antreaKubeconfig (antreaClientConnection.kubeconfig) at a kubeconfig for the antrea-controller",
            ));
            return;
        }
    };
    let scope = SourceConfig {
        node_key: crate::wiring::controlplane_node_key(cfg),
        backoff: k8s::BackoffConfig::default(),
    };
    for kind in CpKind::ALL {
        let (p, q) = scope.request(kind);
        let what = format!("rbac controlplane {}", kind.plural());
        match client.watch(&p, &q).map(|mut w| w.next_line()) {
            Ok(Some(Ok(_)) | None) => {
                out.push(ok(&what, format!("watch answers ({})", client.server())))
            }
            Ok(Some(Err(e))) | Err(e) => out.push(bad(
                Level::Fail,
                &what,
                format!("{}: {e}", client.server()),
                "kubectl apply -f deploy/rbac.yaml (the tether-networkpolicy ClusterRole), and check the antrea-controller's address",
            )),
        }
    }
    client.shutdown();
    out.push(ok(
        "networkpolicy",
        format!(
            "on for span {}: the bridge runs fail_mode=secure (after an ovs-vswitchd restart nothing passes until tether has put its flows back)",
            scope.node_key
        ),
    ));
}
