//! Errors in the shape of the API server's `Status` object, so clients see
//! the same codes and reasons a real cluster would give them.

use serde_json::{Value, json};
use std::fmt;

/// A failed API operation: an HTTP status code, the Kubernetes `reason`
/// (`NotFound`, `AlreadyExists`, `Conflict`, `Expired`, ...) and a message.
///
/// The test-side API of [`crate::StandIn`] returns the same errors a client
/// would get over HTTP for the same operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    code: u16,
    reason: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn not_found(plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural} \"{name}\" not found"))
    }

    pub(crate) fn already_exists(plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{plural} \"{name}\" already exists"),
        )
    }

    pub(crate) fn conflict(plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {plural} \"{name}\": the object has been \
                 modified; please apply your changes to the latest version and try again"
            ),
        )
    }

    /// 410 Gone: the resource version asked for has been compacted away.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    pub(crate) fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource: {method} {path}"
            ),
        )
    }

    /// The HTTP status code, e.g. 404.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The Kubernetes `Status.reason`, e.g. `"NotFound"`.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `Status` object the API server sends for this error.
    pub fn to_status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}
