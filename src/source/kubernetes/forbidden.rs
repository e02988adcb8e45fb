//! What holdfast says when the API server's authorizer refuses a request
//! (403 Forbidden). The server's own message names the verb and the
//! resource ("cannot watch resource \"services\" in API group \"\" at the
//! cluster scope"); holdfast adds where the grant lives, so that the fix
//! is one step. Nothing else changes: the request is retried as any other
//! failure is, and the last known VIPs stand meanwhile.

use kube::runtime::watcher;

/// Appended to a refused request's error.
pub(crate) const RBAC_HINT: &str = "RBAC refused it: the holdfast ServiceAccount needs this \
     permission, as deploy/cluster/rbac.yaml (or the Helm chart's ClusterRole) grants it; \
     holdfast retries on its own once it is granted";

/// The HTTP status of an API error, if the server answered with one.
fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// `error` as text, with [`RBAC_HINT`] when the server refused it.
pub(crate) fn describe(error: &kube::Error) -> String {
    with_hint(error.to_string(), status_code(error))
}

/// A watcher's `error` as text, with [`RBAC_HINT`] when the server
/// refused its list or watch.
pub(crate) fn describe_watch(error: &watcher::Error) -> String {
    let code = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => status_code(e),
        watcher::Error::WatchError(status) => Some(status.code),
        watcher::Error::NoResourceVersion => None,
    };
    with_hint(error.to_string(), code)
}

fn with_hint(text: String, code: Option<u16>) -> String {
    if code == Some(403) {
        format!("{text}; {RBAC_HINT}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            message: message.into(),
            reason: if code == 403 { "Forbidden" } else { "NotFound" }.into(),
            status: Some(kube::core::response::StatusSummary::Failure),
            ..Status::default()
        }))
    }

    #[test]
    fn a_refusal_names_the_permission_and_where_it_is_granted() {
        let message = "services is forbidden: User \"system:serviceaccount:holdfast:holdfast\" \
                       cannot list resource \"services\" in API group \"\" at the cluster scope";
        let text = describe_watch(&watcher::Error::InitialListFailed(api_error(403, message)));
        assert!(text.contains("cannot list resource \"services\""), "{text}");
        assert!(text.ends_with(RBAC_HINT), "{text}");
        let text = describe(&api_error(403, message));
        assert!(text.ends_with(RBAC_HINT), "{text}");
    }

    #[test]
    fn other_errors_are_told_as_they_are() {
        let error = api_error(404, "bgpnodestatuses.holdfast.dev \"n1\" not found");
        assert_eq!(describe(&error), error.to_string());
        let error = watcher::Error::WatchFailed(api_error(410, "too old resource version"));
        assert!(!describe_watch(&error).contains("RBAC"));
    }
}
