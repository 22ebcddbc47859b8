//! Paths as data. A protocol lists its routes as [`Spec`]s: a path pattern,
//! the methods it answers, and how a match becomes the protocol's route
//! value. [`find`] matches a request line against a table, in the table's
//! order (a literal segment listed first wins over a parameter), so the
//! routes a deployment serves are exactly the tables' rows: the router can
//! list them (`protocols::table`) and a test can hold every one of them
//! against the access matrix.

use crate::wire::error::ApiError;
use crate::wire::ids;

/// One route of a table.
pub struct Spec<R> {
    /// The path pattern: literal segments, `:name` for one segment, and a
    /// last `*` for the rest of the path (one or more segments).
    pub path: &'static str,
    /// The methods it answers (`HEAD` is answered wherever `GET` is).
    pub methods: &'static [&'static str],
    /// The route a match names, from the path's parameters and the method
    /// (one of `methods`, or `HEAD` for a `GET` route).
    pub build: fn(&Params, &str) -> Result<R, ApiError>,
}

/// The parameters a pattern captured, by name.
#[derive(Debug, Default)]
pub struct Params<'a> {
    values: Vec<(&'static str, &'a str)>,
}

impl<'a> Params<'a> {
    /// A captured segment as it came (`*` names the rest of the path).
    pub fn raw(&self, name: &str) -> &'a str {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v).unwrap_or_default()
    }

    /// A thread id (400 `invalid_id` when malformed).
    pub fn thread(&self, name: &str) -> Result<String, ApiError> {
        ids::id(self.raw(name))
    }

    /// A scoped id (`<threadId>.<id>`: a run, a request): its thread, or
    /// `missing` when it names none, and the id itself.
    pub fn scoped(&self, name: &str, missing: fn() -> ApiError) -> Result<(String, String), ApiError> {
        let raw = self.raw(name);
        let thread = ids::thread_of(raw).ok_or_else(missing)?;
        Ok((thread.to_owned(), raw.to_owned()))
    }
}

/// Matches `path`'s segments against `pattern`'s.
fn captures<'a>(pattern: &'static str, path: &'a str) -> Option<Params<'a>> {
    let mut params = Params::default();
    let mut segments = path.trim_start_matches('/').split('/');
    let mut rest = path.trim_start_matches('/');
    for want in pattern.trim_start_matches('/').split('/') {
        if want == "*" {
            // The rest of the path, one segment at least.
            return (!rest.is_empty()).then(|| {
                params.values.push(("*", rest));
                params
            });
        }
        let got = segments.next()?;
        rest = rest.get(got.len() + 1..).unwrap_or_default();
        match want.strip_prefix(':') {
            Some(name) => params.values.push((name, got)),
            None if want == got => {}
            None => return None,
        }
    }
    segments.next().is_none().then_some(params)
}

/// A route found in a table: the pattern the path matched (`http.route` in
/// traces and logs), and the route it names or the refusal.
pub struct Found<R> {
    pub pattern: &'static str,
    pub route: Result<R, ApiError>,
}

/// The route `method` + `path` names in `table`: `None` when no pattern
/// matches the path; otherwise the route, or the refusal: 405
/// `method_not_allowed` (with the methods it answers) for a known path with
/// another method, or the builder's own (400 `invalid_id`, ...). The
/// pattern is the spec that answers, or for a 405 the first that matched.
pub fn find<R>(table: &[Spec<R>], method: &str, path: &str) -> Option<Found<R>> {
    let mut allowed: Vec<&str> = Vec::new();
    let mut first: Option<&'static str> = None;
    for spec in table {
        let Some(params) = captures(spec.path, path) else { continue };
        let head_of_get = method == "HEAD" && spec.methods.contains(&"GET");
        if spec.methods.contains(&method) || head_of_get {
            return Some(Found { pattern: spec.path, route: (spec.build)(&params, method) });
        }
        first.get_or_insert(spec.path);
        for m in spec.methods {
            if !allowed.contains(m) {
                allowed.push(m);
            }
        }
    }
    first.map(|pattern| Found { pattern, route: Err(ApiError::method_not_allowed(path, &allowed.join(", "))) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    enum R {
        Chat(String),
        Cancel(String),
        Pause(String),
        Item(String, String),
        Stream(String),
    }

    const TABLE: &[Spec<R>] = &[
        Spec { path: "/x/chat/:t", methods: &["POST"], build: |p, _| Ok(R::Chat(p.thread("t")?)) },
        Spec { path: "/x/chat/:t/cancel", methods: &["POST"], build: |p, _| Ok(R::Cancel(p.thread("t")?)) },
        Spec { path: "/x/q/:t/pause", methods: &["POST"], build: |p, _| Ok(R::Pause(p.thread("t")?)) },
        Spec {
            path: "/x/q/:t/:m",
            methods: &["PATCH", "DELETE"],
            build: |p, _| Ok(R::Item(p.thread("t")?, p.raw("m").into())),
        },
        Spec { path: "/s/*", methods: &["GET", "PUT"], build: |p, _| Ok(R::Stream(p.raw("*").into())) },
    ];

    #[test]
    fn literal_rows_listed_first_win_and_methods_are_checked() {
        assert_eq!(find(TABLE, "POST", "/x/chat/t1").unwrap().route.unwrap(), R::Chat("t1".into()));
        assert_eq!(find(TABLE, "POST", "/x/chat/t1/cancel").unwrap().route.unwrap(), R::Cancel("t1".into()));
        assert_eq!(find(TABLE, "POST", "/x/q/t1/pause").unwrap().route.unwrap(), R::Pause("t1".into()));
        assert_eq!(
            find(TABLE, "DELETE", "/x/q/t1/pause").unwrap().route.unwrap(),
            R::Item("t1".into(), "pause".into())
        );
        let wrong = find(TABLE, "GET", "/x/q/t1/m1").unwrap().route.unwrap_err();
        assert_eq!((wrong.status, wrong.allow()), (405, Some("PATCH, DELETE")));
        assert_eq!(find(TABLE, "POST", "/x/chat/bad%20id").unwrap().route.unwrap_err().code, "invalid_id");
        assert!(find(TABLE, "POST", "/x/chat").is_none());
        assert!(find(TABLE, "POST", "/x/chat/t1/cancel/more").is_none());
        assert!(find(TABLE, "GET", "/nope").is_none());
    }

    #[test]
    fn the_pattern_is_the_spec_that_answers_or_for_a_405_the_first_that_matched() {
        assert_eq!(find(TABLE, "POST", "/x/q/t1/pause").unwrap().pattern, "/x/q/:t/pause");
        assert_eq!(find(TABLE, "DELETE", "/x/q/t1/pause").unwrap().pattern, "/x/q/:t/:m");
        assert_eq!(find(TABLE, "GET", "/x/q/t1/pause").unwrap().pattern, "/x/q/:t/pause");
        assert_eq!(find(TABLE, "POST", "/x/chat/bad%20id").unwrap().pattern, "/x/chat/:t");
    }

    #[test]
    fn a_star_takes_the_rest_of_the_path_and_head_follows_get() {
        assert_eq!(find(TABLE, "GET", "/s/a/b/c").unwrap().route.unwrap(), R::Stream("a/b/c".into()));
        assert_eq!(find(TABLE, "HEAD", "/s/a").unwrap().route.unwrap(), R::Stream("a".into()));
        assert!(find(TABLE, "GET", "/s/").is_none(), "one segment at least");
        assert_eq!(find(TABLE, "HEAD", "/x/chat/t").unwrap().route.unwrap_err().status, 405, "HEAD only where GET is");
    }
}
