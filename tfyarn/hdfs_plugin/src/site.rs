//! The Hadoop client configuration the plugin's hdfs-native client reads:
//! `$HADOOP_CONF_DIR` (else `$HADOOP_HOME/etc/hadoop`), its core-site.xml and
//! hdfs-site.xml. Read the way tfyarn.contract.hadoop_conf reads them (the
//! last definition of a property wins unless an earlier one is final; a
//! missing or unreadable file reads as empty: hdfs-native reports it itself).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One NameNode of a name service: its id and RPC `host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameNode {
    pub id: String,
    pub address: String,
}

/// The two site files of one configuration directory.
#[derive(Clone, Debug, Default)]
pub struct Site {
    pub core: HashMap<String, String>,
    pub hdfs: HashMap<String, String>,
}

impl Site {
    /// The directory hdfs-native reads when it is given none.
    pub fn conf_dir() -> Option<PathBuf> {
        match std::env::var_os("HADOOP_CONF_DIR") {
            Some(dir) => Some(PathBuf::from(dir)),
            None => std::env::var_os("HADOOP_HOME").map(|h| Path::new(&h).join("etc/hadoop")),
        }
    }

    /// The site files of [`Site::conf_dir`] (empty without one).
    pub fn from_env() -> Site {
        Site::conf_dir().map(|d| Site::read(&d)).unwrap_or_default()
    }

    pub fn read(dir: &Path) -> Site {
        Site { core: read_file(&dir.join("core-site.xml")), hdfs: read_file(&dir.join("hdfs-site.xml")) }
    }

    /// A property as hdfs-native sees it: hdfs-site.xml over core-site.xml.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.hdfs.get(key).or_else(|| self.core.get(key)).map(String::as_str)
    }

    /// Both files' properties whose name starts with `prefix`.
    pub fn with_prefix<'a>(&'a self, prefix: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.core
            .iter()
            .filter(|(k, _)| !self.hdfs.contains_key(*k))
            .chain(self.hdfs.iter())
            .filter(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// `fs.defaultFS` of core-site.xml.
    pub fn default_fs(&self) -> Option<&str> {
        self.core.get("fs.defaultFS").map(String::as_str).filter(|v| !v.is_empty())
    }

    /// Each name service of `dfs.nameservices` in hdfs-site.xml and its
    /// NameNodes (`dfs.ha.namenodes.<ns>`, `dfs.namenode.rpc-address.<ns>.<nn>`;
    /// without ids, one NameNode at `dfs.namenode.rpc-address.<ns>`), as
    /// `HadoopConf.name_services` lists them. A NameNode with no address is left out.
    pub fn name_services(&self) -> HashMap<String, Vec<NameNode>> {
        let props = &self.hdfs;
        let get = |key: String| props.get(&key).cloned().unwrap_or_default();
        let mut out = HashMap::new();
        for ns in split(&get("dfs.nameservices".into())) {
            let ids = split(&get(format!("dfs.ha.namenodes.{ns}")));
            let nodes: Vec<NameNode> = if ids.is_empty() {
                vec![NameNode { id: String::new(), address: get(format!("dfs.namenode.rpc-address.{ns}")) }]
            } else {
                ids.iter()
                    .map(|nn| NameNode { id: nn.clone(), address: get(format!("dfs.namenode.rpc-address.{ns}.{nn}")) })
                    .collect()
            };
            out.insert(ns, nodes.into_iter().filter(|n| !n.address.is_empty()).collect());
        }
        out
    }
}

fn split(value: &str) -> Vec<String> {
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

fn read_file(path: &Path) -> HashMap<String, String> {
    let mut values = HashMap::new();
    let Ok(text) = std::fs::read_to_string(path) else { return values };
    let Ok(doc) = roxmltree::Document::parse(&text) else { return values };
    let mut last_final = HashSet::new();
    for prop in doc.descendants().filter(|n| n.has_tag_name("property")) {
        let field = |name: &str| {
            prop.children()
                .find(|c| c.has_tag_name(name))
                .map(|c| c.text().unwrap_or("").trim().to_string())
                .unwrap_or_default()
        };
        let key = field("name");
        if key.is_empty() || last_final.contains(&key) {
            continue;
        }
        if field("final").eq_ignore_ascii_case("true") {
            last_final.insert(key.clone());
        }
        values.insert(key, field("value"));
    }
    values
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A fresh directory under the system's temp dir, its own for every call (tests run on
    /// parallel threads of one process, and one helper may serve several of them at once),
    /// removed when dropped.
    pub struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    pub fn temp_dir(name: &str) -> TempDir {
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tfyarn-plugin-{}-{name}-{call}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn write_site(path: &Path, props: &[(&str, &str)]) {
        let body: String =
            props.iter().map(|(k, v)| format!("<property><name>{k}</name><value>{v}</value></property>")).collect();
        std::fs::write(path, format!("<?xml version=\"1.0\"?><configuration>{body}</configuration>")).unwrap();
    }

    #[test]
    fn reads_services_and_properties_as_hadoop_conf_does() {
        let dir = temp_dir("site");
        write_site(
            &dir.join("hdfs-site.xml"),
            &[
                ("dfs.nameservices", " ns1 , plain,"),
                ("dfs.ha.namenodes.ns1", "nn1,nn2,nn3"),
                ("dfs.namenode.rpc-address.ns1.nn1", "a:8020"),
                ("dfs.namenode.rpc-address.ns1.nn2", "b:8020"),
                ("dfs.namenode.rpc-address.plain", "c:8020"),
                ("k", "from hdfs"),
            ],
        );
        write_site(&dir.join("core-site.xml"), &[("fs.defaultFS", "hdfs://ns1"), ("k", "from core")]);
        let site = Site::read(&dir);
        let services = site.name_services();
        let ids: Vec<&str> = services["ns1"].iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["nn1", "nn2"]); // nn3 has no address
        assert_eq!(services["plain"], [NameNode { id: String::new(), address: "c:8020".into() }]);
        assert_eq!(site.default_fs(), Some("hdfs://ns1"));
        assert_eq!(site.get("k"), Some("from hdfs"));
        assert!(Site::read(&dir.join("absent")).name_services().is_empty());
    }

    #[test]
    fn a_final_property_keeps_its_first_value() {
        let dir = temp_dir("final");
        std::fs::write(
            dir.join("core-site.xml"),
            "<configuration><property><name>a</name><value>1</value><final>true</final></property>\
             <property><name>a</name><value>2</value></property>\
             <property><name>b</name><value>1</value></property>\
             <property><name>b</name><value>2</value></property></configuration>",
        )
        .unwrap();
        let site = Site::read(&dir);
        assert_eq!((site.get("a"), site.get("b")), (Some("1"), Some("2")));
    }
}
