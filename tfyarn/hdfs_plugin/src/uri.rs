//! `scheme://authority/path` as TensorFlow hands it to the plugin.

/// A parsed `hdfs://` or `viewfs://` URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Uri {
    pub scheme: String,
    /// `host:port`, a name service, a ViewFS cluster, or empty (fs.defaultFS).
    pub authority: String,
    /// Absolute, cleaned path (`/` at least).
    pub path: String,
}

impl Uri {
    pub fn parse(uri: &str) -> Option<Uri> {
        let (scheme, rest) = uri.split_once("://")?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        Some(Uri {
            scheme: scheme.to_string(),
            authority: authority.to_string(),
            path: clean_path(path),
        })
    }

    pub fn prefix(&self) -> String {
        format!("{}://{}", self.scheme, self.authority)
    }
}

impl std::fmt::Display for Uri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.path)
    }
}

/// `io::CleanPath` of TensorFlow: no `//`, `.` or `..`, no trailing `/`.
pub fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// TensorFlow's canonical form of a URI: the scheme and authority kept (the
/// default translation drops them, and with them the NameNode), the path cleaned.
pub fn translate(uri: &str) -> String {
    match Uri::parse(uri) {
        Some(u) => u.to_string(),
        None => uri.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_cleans() {
        let u = Uri::parse("hdfs://nn:8020//a/./b/../c/").unwrap();
        assert_eq!(u.authority, "nn:8020");
        assert_eq!(u.path, "/a/c");
        assert_eq!(u.to_string(), "hdfs://nn:8020/a/c");
        assert_eq!(translate("hdfs:///x//y"), "hdfs:///x/y");
        assert_eq!(translate("viewfs://cluster"), "viewfs://cluster/");
    }
}
