//! How long the client keeps trying NameNodes: through a failover, or not at all.
//!
//! The same rule, with the same numbers, as tfyarn/data/fs/failover.py (its
//! docstring has the whole story; change both together). In short:
//! hdfs-native (`NameServiceProxy::call_inner`) tries a target's `n` NameNodes
//! in turn, sleeps `min(base * 2^pass * jitter, max)` ms (jitter 0.5-1.5)
//! after each pass over all of them, and gives up after `max.attempts`
//! failovers.
//!
//! - A name service with two or more NameNodes gets [`HA`]: seven passes of
//!   sleeps, at least 19.5 s and at most 24.5 s in all, then one more try of
//!   each NameNode: a failover (ZKFC notices in about a second, the standby
//!   becomes active a few seconds later) is ridden out.
//! - One NameNode (`hdfs://host:port`, a service of one) gets [`FAST`]: three
//!   attempts within 1.6 s, so a mistyped address fails at once.
//!
//! The target is the URI's authority if `dfs.nameservices` names it (one with
//! a port is a single NameNode), `fs.defaultFS` for `hdfs:///`, and for
//! `viewfs://` every name service its mount table links to. A key the user's
//! core-site.xml or hdfs-site.xml sets is left to it (hdfs-native reads them).

use crate::site::{NameNode, Site};

pub const MAX_ATTEMPTS: &str = "dfs.client.failover.max.attempts";
pub const SLEEP_BASE: &str = "dfs.client.failover.sleep.base.millis";
pub const SLEEP_MAX: &str = "dfs.client.failover.sleep.max.millis";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Sleeps between passes over all NameNodes.
    pub passes: u32,
    pub sleep_base_ms: u64,
    pub sleep_max_ms: u64,
}

/// A name service of two or more NameNodes: ride out a failover.
pub const HA: Policy = Policy { passes: 7, sleep_base_ms: 500, sleep_max_ms: 4000 };
/// One NameNode: a wrong address fails in under two seconds.
pub const FAST: Policy = Policy { passes: 2, sleep_base_ms: 200, sleep_max_ms: 1000 };

impl Policy {
    /// `max.attempts` for `namenodes` NameNodes: hdfs-native sleeps at every
    /// `namenodes`-th failover and gives up at the `max.attempts`-th, so
    /// `passes` sleeps and then one more try of each.
    pub fn max_attempts(&self, namenodes: usize) -> u32 {
        let n = namenodes.max(1) as u32;
        self.passes * n + n - 1
    }

    pub fn options(&self, namenodes: usize) -> [(&'static str, String); 3] {
        [
            (MAX_ATTEMPTS, self.max_attempts(namenodes).to_string()),
            (SLEEP_BASE, self.sleep_base_ms.to_string()),
            (SLEEP_MAX, self.sleep_max_ms.to_string()),
        ]
    }
}

/// A name service the client reaches, and its NameNodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameService {
    pub name: String,
    pub namenodes: Vec<NameNode>,
}

/// The name services of `site` a client for `scheme://authority` talks to
/// (none for `host:port`).
pub fn name_services(scheme: &str, authority: &str, site: &Site) -> Vec<NameService> {
    let known = site.name_services();
    let mut found: Vec<NameService> = Vec::new();
    for target in targets(scheme, authority, site, 0) {
        if let Some(nodes) = known.get(&target) {
            if !found.iter().any(|s| s.name == target) {
                found.push(NameService { name: target, namenodes: nodes.clone() });
            }
        }
    }
    found
}

/// The port-less `hdfs://` authorities behind `scheme://authority`.
fn targets(scheme: &str, authority: &str, site: &Site, depth: u32) -> Vec<String> {
    match scheme {
        "hdfs" if authority.is_empty() && depth == 0 => {
            match site.default_fs().and_then(|d| d.split_once("://")) {
                Some((s, rest)) if s == "hdfs" || s == "viewfs" => {
                    let auth = rest.split('/').next().unwrap_or("");
                    if auth.is_empty() {
                        vec![]
                    } else {
                        targets(s, auth, site, depth + 1)
                    }
                }
                _ => vec![],
            }
        }
        "hdfs" if authority.contains(':') || authority.is_empty() => vec![],
        "hdfs" => vec![authority.to_string()],
        "viewfs" if depth < 2 => {
            let prefix = format!("fs.viewfs.mounttable.{authority}.");
            let mut out = Vec::new();
            for (key, value) in site.with_prefix(&prefix) {
                let rest = &key[prefix.len()..];
                if !(rest.starts_with("link.") || rest == "linkFallback") {
                    continue;
                }
                if let Some(link) = value.trim().strip_prefix("hdfs://") {
                    let auth = link.split('/').next().unwrap_or("");
                    if !auth.is_empty() {
                        out.extend(targets("hdfs", auth, site, depth + 1));
                    }
                }
            }
            out.sort();
            out
        }
        _ => vec![],
    }
}

/// The settings to hand hdfs-native as overrides: the policy's, less the
/// keys the user's site files set.
pub fn client_options(services: &[NameService], site: &Site) -> Vec<(String, String)> {
    let widest = services.iter().map(|s| s.namenodes.len()).max().unwrap_or(1);
    let policy = if widest >= 2 { HA } else { FAST };
    policy
        .options(widest)
        .into_iter()
        .filter(|(k, _)| site.get(k).is_none())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

/// `the name service ns1 (nn1 at h1:8020, nn2 at h2:8020)` for messages.
pub fn describe(services: &[NameService]) -> String {
    let word = if services.len() == 1 { "name service" } else { "name services" };
    let each: Vec<String> = services
        .iter()
        .map(|s| {
            let nodes: Vec<String> = s
                .namenodes
                .iter()
                .map(|n| if n.id.is_empty() { n.address.clone() } else { format!("{} at {}", n.id, n.address) })
                .collect();
            let nodes = if nodes.is_empty() { "no NameNode addresses configured".into() } else { nodes.join(", ") };
            format!("{} ({nodes})", s.name)
        })
        .collect();
    format!("the {word} {}", each.join("; "))
}

/// The advice for a name service none of whose NameNodes served a call.
pub fn what_to_check(services: &[NameService]) -> String {
    let admin: Vec<String> =
        services.iter().map(|s| format!("`hdfs haadmin -ns {} -getAllServiceState`", s.name)).collect();
    let keys: Vec<String> = services.iter().map(|s| format!("dfs.namenode.rpc-address.{}.*", s.name)).collect();
    format!(
        "Check which NameNode is active with {} (`tfyarn cluster status` for the local cluster), and the addresses in {} of $HADOOP_CONF_DIR/hdfs-site.xml",
        admin.join(" or "),
        keys.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::tests::{temp_dir, write_site};

    /// hdfs-native's `call_inner` against NameNodes that all fail, at one
    /// jitter: the sleeps (ms) and the NameNode of each attempt.
    fn simulate(namenodes: usize, policy: Policy, jitter: f64) -> (Vec<u64>, Vec<usize>) {
        let max_attempts = policy.max_attempts(namenodes);
        let (mut sleeps, mut tried) = (Vec::new(), Vec::new());
        let (mut index, mut failovers) = (0usize, 0u32);
        loop {
            tried.push(index);
            if failovers >= max_attempts {
                return (sleeps, tried);
            }
            failovers += 1;
            if failovers % namenodes as u32 == 0 {
                let uncapped = policy.sleep_base_ms.saturating_mul(1u64 << (failovers / namenodes as u32).min(32));
                sleeps.push(((uncapped as f64 * jitter) as u64).min(policy.sleep_max_ms));
            }
            index = (index + 1) % namenodes;
        }
    }

    #[test]
    fn an_ha_service_rides_out_20_s_and_gives_up_within_25_s() {
        for n in [2usize, 3, 5] {
            let (least, tried) = simulate(n, HA, 0.5);
            let (most, _) = simulate(n, HA, 1.5);
            assert_eq!((least.iter().sum::<u64>(), most.iter().sum::<u64>()), (19_500, 24_500));
            let mut last: Vec<usize> = tried[tried.len() - n..].to_vec();
            last.sort();
            assert_eq!(last, (0..n).collect::<Vec<_>>(), "every NameNode is tried after the last sleep");
        }
        assert_eq!(HA.max_attempts(2), 15);
        let (least, tried) = simulate(1, FAST, 0.5);
        let (most, _) = simulate(1, FAST, 1.5);
        assert_eq!((tried.len(), least.iter().sum::<u64>(), most.iter().sum::<u64>()), (3, 600, 1600));
    }

    fn site() -> Site {
        let dir = temp_dir("failover");
        write_site(
            &dir.join("hdfs-site.xml"),
            &[
                ("dfs.nameservices", "ns1,solo"),
                ("dfs.ha.namenodes.ns1", "nn1,nn2"),
                ("dfs.namenode.rpc-address.ns1.nn1", "10.0.0.1:8020"),
                ("dfs.namenode.rpc-address.ns1.nn2", "10.0.0.2:8020"),
                ("dfs.ha.namenodes.solo", "only"),
                ("dfs.namenode.rpc-address.solo.only", "10.0.0.9:8020"),
            ],
        );
        write_site(
            &dir.join("core-site.xml"),
            &[("fs.defaultFS", "hdfs://ns1"), ("fs.viewfs.mounttable.cluster.link./data", "hdfs://ns1/data")],
        );
        Site::read(&dir)
    }

    fn attempts(scheme: &str, authority: &str, site: &Site) -> String {
        let options = client_options(&name_services(scheme, authority, site), site);
        options.iter().find(|(k, _)| k == MAX_ATTEMPTS).map(|(_, v)| v.clone()).unwrap_or_default()
    }

    #[test]
    fn the_target_decides_the_settings() {
        let site = site();
        for (scheme, authority) in [("hdfs", "ns1"), ("hdfs", ""), ("viewfs", "cluster")] {
            assert_eq!(attempts(scheme, authority, &site), "15", "{scheme}://{authority}");
        }
        for (scheme, authority) in [("hdfs", "nn:8020"), ("hdfs", "solo"), ("hdfs", "unknown"), ("viewfs", "x")] {
            assert_eq!(attempts(scheme, authority, &site), "2", "{scheme}://{authority}");
        }
        let options = client_options(&name_services("hdfs", "ns1", &site), &site);
        let expected: Vec<(String, String)> = [(MAX_ATTEMPTS, "15"), (SLEEP_BASE, "500"), (SLEEP_MAX, "4000")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(options, expected);
    }

    #[test]
    fn keys_the_user_set_are_left_to_the_client() {
        let mut site = site();
        site.hdfs.insert(MAX_ATTEMPTS.into(), "40".into());
        site.core.insert(SLEEP_MAX.into(), "7000".into());
        let options = client_options(&name_services("hdfs", "ns1", &site), &site);
        assert_eq!(options, vec![(SLEEP_BASE.to_string(), "500".to_string())]);
    }

    #[test]
    fn messages_name_the_service_its_namenodes_and_what_to_run() {
        let services = name_services("hdfs", "ns1", &site());
        assert_eq!(describe(&services), "the name service ns1 (nn1 at 10.0.0.1:8020, nn2 at 10.0.0.2:8020)");
        let advice = what_to_check(&services);
        assert!(advice.contains("`hdfs haadmin -ns ns1 -getAllServiceState`"), "{advice}");
        assert!(advice.contains("`tfyarn cluster status`"), "{advice}");
    }
}
