/* scp/tls.hh: TLS connections whose handshake is bounded, shared by the
 * listener (server.cc) and the sender (scu.cc). Private to scp/.
 *
 * DCMTK runs a TLS handshake as one blocking SSL_accept / SSL_connect, so
 * a peer that connects and stays silent would hold the thread for ever;
 * these connections give the socket a receive and send timeout for the
 * handshake only. Any thread may use them (one connection per thread).
 */
#ifndef LDCT_SCP_TLS_HH
#define LDCT_SCP_TLS_HH

#include "scp/internal.hh"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmtls/tlslayer.h>
#include <dcmtk/dcmtls/tlstrans.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

/* Makes verification check that the peer's certificate carries name (a
 * DNS name, or an IP address given as one): OpenSSL's 1, or 0. */
int scp__tls_peer_name(X509_VERIFY_PARAM *p, const char *name);

/* c, or when the peer's certificate failed verification a condition that
 * also says why (OpenSSL's reason: "hostname mismatch", "certificate has
 * expired", ...), which OpenSSL's error queue alone does not. */
OFCondition scp__tls_verify_reason(const OFCondition &c, SSL *ssl);

/* Conn (DcmTLSConnection or a class built on it with the same
 * constructor) whose handshakes wait at most timeout_s for the peer. */
template <class Conn> class bounded_tls : public Conn
{
  public:
    bounded_tls(DcmNativeSocketType sock, SSL *ssl, int timeout_s)
        : Conn(sock, ssl), ssl_(ssl), timeout_s_(timeout_s)
    {
    }
    OFCondition serverSideHandshake() override
    {
        return bounded([this] { return Conn::serverSideHandshake(); });
    }
    OFCondition clientSideHandshake() override
    {
        return bounded([this] { return Conn::clientSideHandshake(); });
    }

  private:
    template <class F> OFCondition bounded(F handshake)
    {
        scp__socket_timeouts((int)this->getSocket(), timeout_s_);
        OFCondition c = handshake();
        scp__socket_timeouts((int)this->getSocket(), 0);
        return c.bad() ? scp__tls_verify_reason(c, ssl_) : c;
    }
    SSL *ssl_; /* owned by Conn */
    int timeout_s_;
};

/* A connection of context ctx (a configured layer's getNativeHandle()) on
 * the accepted or connected socket: Conn with its handshake bounded by
 * timeout_s and, when peer_name is set, the peer's certificate checked for
 * it; nullptr when OpenSSL cannot make the connection's object (DCMTK then
 * closes the socket). The connection holds its own reference to ctx. */
template <class Conn>
DcmTransportConnection *scp__tls_connection(SSL_CTX *ctx, DcmNativeSocketType sock, int timeout_s,
                                            const char *peer_name = nullptr)
{
    SSL *ssl = SSL_new(ctx);
    if (!ssl)
        return nullptr;
    if (peer_name && *peer_name && scp__tls_peer_name(SSL_get0_param(ssl), peer_name) != 1) {
        SSL_free(ssl);
        return nullptr;
    }
    SSL_set_fd(ssl, (int)sock);
    return new bounded_tls<Conn>(sock, ssl, timeout_s);
}

/* The certificate the peer of assoc sent in its TLS handshake (owned by
 * the caller), or NULL: none, or not TLS. */
X509 *scp__tls_peer_certificate(T_ASC_Association *assoc);

/* "CN=scanner,O=Hospital" (RFC 2253), or "?". */
std::string scp__tls_subject(const X509 *x);

/* The DNS names and IP addresses in x's subjectAltName, "DNS:a, IP:b";
 * "" when it has none. A DNS name there is what a name is matched
 * against, not the CN. */
std::string scp__tls_alt_names(const X509 *x);

/* A sender's TLS setup (scp.h): the configured layer, shared by handles. */
struct scp_tls_ctx {
    std::shared_ptr<DcmTLSTransportLayer> layer;
};

#endif
