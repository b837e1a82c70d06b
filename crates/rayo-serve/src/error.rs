//! Errors as OpenAI sends them: `{"error": {"message", "type", "param", "code"}}` with the HTTP
//! status that goes with the type.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An error answer: status, OpenAI `type`, the request field at fault (if one is) and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    pub message: String,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, param: None, code: None, message: message.into() }
    }

    /// 400 about one field of the request.
    pub fn field(param: &str, message: impl Into<String>) -> ApiError {
        ApiError { param: Some(param.to_string()), ..ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message) }
    }

    /// 400 about the request as a whole (malformed JSON, not an object).
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400: the prompt does not fit the context (OpenAI's `context_length_exceeded`).
    pub fn context(param: &str, message: impl Into<String>) -> ApiError {
        ApiError { code: Some("context_length_exceeded"), ..ApiError::field(param, message) }
    }

    /// 401: no key or a wrong one.
    pub fn unauthorized() -> ApiError {
        ApiError {
            code: Some("invalid_api_key"),
            ..ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authentication_error",
                "a valid API key is required (Authorization: Bearer KEY, or X-Api-Key: KEY)",
            )
        }
    }

    /// 404: no such route.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found_error", format!("no route {path}"))
    }

    /// 405: the route exists, not with this method.
    pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
        ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "invalid_request_error", format!("{path} does not take {method}"))
    }

    /// 404: a request names another model and `--strict-model-name` is on (vLLM's answer).
    pub fn model_not_found(asked: &str, served: &str) -> ApiError {
        ApiError {
            param: Some("model".into()),
            code: Some("model_not_found"),
            ..ApiError::new(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                format!("the model {asked:?} does not exist here; this server has {served:?}"),
            )
        }
    }

    /// 413: the body is over the limit (`size`: its declared length, or the bytes read so far).
    pub fn too_large(size: u64, limit: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is {size} bytes or more, over the limit of {limit} bytes (--body-limit)"),
        )
    }

    /// 408: the body did not all arrive in time (`got`: the bytes that did).
    pub fn body_timeout(limit: std::time::Duration, got: usize) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            format!("the request body did not arrive within {} s ({got} bytes came; --body-timeout)", limit.as_secs_f64()),
        )
    }

    /// 429: the queue is full.
    pub fn queue_full(capacity: usize) -> ApiError {
        ApiError {
            code: Some("rate_limit_exceeded"),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!("the server's queue is full ({capacity} requests waiting); try again later"),
            )
        }
    }

    /// 503: loading the model, draining for shutdown, or the engine has stopped.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable_error", message)
    }

    /// 500: the engine failed on this request.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.body().to_string();
        (self.status, [(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_is_openais() {
        let e = ApiError::field("temperature", "must be a number");
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            e.body(),
            json!({"error": {"message": "must be a number", "type": "invalid_request_error", "param": "temperature", "code": null}})
        );
        assert_eq!(ApiError::unauthorized().status.as_u16(), 401);
        assert_eq!(ApiError::queue_full(4).status.as_u16(), 429);
        assert_eq!(ApiError::too_large(11, 10).status.as_u16(), 413);
        assert!(ApiError::too_large(11, 10).message.contains("11 bytes or more, over the limit of 10 bytes"));
        assert_eq!(ApiError::body_timeout(std::time::Duration::from_secs(2), 5).status.as_u16(), 408);
        assert_eq!(ApiError::model_not_found("gpt-4", "m").status.as_u16(), 404);
        assert_eq!(ApiError::unavailable("loading").status.as_u16(), 503);
    }
}
