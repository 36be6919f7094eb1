//! TLS with rustls on the ring provider, for PostgreSQL (`sslmode=` in `DATABASE_URL`) and
//! https webhook receivers: a leaf module every part of the service may call.

/// Makes rustls's ring provider the process's default; harmless when called again.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
