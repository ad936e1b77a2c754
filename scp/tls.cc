/* scp/tls.cc: DICOM TLS for the listener and the sender. The one place
 * that turns an scp_tls into a configured DCMTK TLS transport layer, with
 * a readable reason for each file that does not load.
 *
 * Profile: non-downgrading BCP 195 (DCMTK's TSP_Profile_BCP195_ND: TLS 1.2
 * or later with the cipher suites RFC 7525 recommends, DCMTK's own default),
 * or BCP 195 with fallback for older peers (scp_tls.legacy). OpenSSL is initialised once per
 * process (std::call_once); any thread may call these functions.
 */
#include "scp/scp.h"
#include "scp/internal.hh"
#include "scp/tls.hh"

/* common/ headers are plain C without linkage guards. */
extern "C" {
#include "common/err.h"
}

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmtls/tlslayer.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace
{

std::once_flag g_openssl;

bool set(const char *s)
{
    return s && *s;
}

/* Our certificate and its key, for a listener (required) or a sender
 * (optional: a peer that asks for one refuses us without it). */
int load_identity(DcmTLSTransportLayer &l, const scp_tls *t, int role_scp, char *err, size_t len)
{
    if (!set(t->certificate) || !set(t->private_key)) {
        if (!role_scp && !set(t->certificate) && !set(t->private_key))
            return 0;
        scp__set_err(err, len, "TLS needs both tls_certificate and tls_private_key");
        return LDCT_EINVAL_CONFIG;
    }
    l.setPrivateKeyPasswd(nullptr); /* an encrypted key fails, never prompts */
    if (l.setPrivateKeyFile(t->private_key, DCF_Filetype_PEM).bad()) {
        scp__set_err(err, len, "cannot read the TLS private key %s (PEM, unencrypted)",
                     t->private_key);
        return LDCT_EINVAL_CONFIG;
    }
    if (l.setCertificateFile(t->certificate, DCF_Filetype_PEM).bad()) {
        scp__set_err(err, len, "cannot read the TLS certificate %s (PEM)", t->certificate);
        return LDCT_EINVAL_CONFIG;
    }
    if (!l.checkPrivateKeyMatchesCertificate()) {
        scp__set_err(err, len, "the TLS private key %s does not belong to the certificate %s",
                     t->private_key, t->certificate);
        return LDCT_EINVAL_CONFIG;
    }
    return 0;
}

struct x509_free {
    void operator()(X509 *x) const
    {
        X509_free(x);
    }
    void operator()(X509_CRL *c) const
    {
        X509_CRL_free(c);
    }
};
using cert_list = std::vector<std::unique_ptr<X509, x509_free>>;
using crl_list = std::vector<std::unique_ptr<X509_CRL, x509_free>>;

/* Every object that read (PEM_read_X509, PEM_read_X509_CRL) finds in a PEM
 * file, in order (none when it does not open). */
template <class T>
std::vector<std::unique_ptr<T, x509_free>>
read_pem(const char *path, T *(*read)(FILE *, T **, pem_password_cb *, void *))
{
    std::vector<std::unique_ptr<T, x509_free>> out;
    FILE *f = fopen(path, "r");
    T *x;
    while (f && (x = read(f, nullptr, nullptr, nullptr)) != nullptr)
        out.emplace_back(x);
    if (f)
        fclose(f);
    ERR_clear_error();
    return out;
}

cert_list read_certs(const char *path)
{
    return read_pem<X509>(path, PEM_read_X509);
}

crl_list read_crls(const char *path)
{
    return read_pem<X509_CRL>(path, PEM_read_X509_CRL);
}

/* "CN=ldct test ca,O=Hospital" */
std::string name_text(const X509_NAME *n)
{
    std::string s = "?";
    BIO *b = BIO_new(BIO_s_mem());
    char *p = nullptr;
    if (b && X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253) >= 0) {
        const long k = BIO_get_mem_data(b, &p);
        if (p && k > 0)
            s.assign(p, (size_t)k);
    }
    BIO_free(b);
    return s;
}

/* Whether ca may sign revocation lists: no keyUsage, or one with cRLSign
 * (OpenSSL refuses a list from any other: "key usage does not include CRL
 * signing"). */
bool signs_crls(X509 *ca)
{
    const uint32_t ku = X509_get_key_usage(ca); /* UINT32_MAX: no keyUsage */
    return ku == UINT32_MAX || (ku & KU_CRL_SIGN) != 0;
}

/* Whether crl comes from a CA of cas: 0 none by its name, 1 named and signed
 * by its key, -1 named but signed by no such CA's key, -2 signed by a CA
 * whose keyUsage leaves out cRLSign. */
int crl_issuer(const cert_list &cas, X509_CRL *crl)
{
    int found = 0;
    for (const auto &ca : cas)
        if (X509_NAME_cmp(X509_get_subject_name(ca.get()), X509_CRL_get_issuer(crl)) == 0) {
            if (X509_CRL_verify(crl, X509_get0_pubkey(ca.get())) == 1) {
                found = signs_crls(ca.get()) ? 1 : -2;
                if (found == 1)
                    break;
            } else if (found == 0) {
                found = -1;
            }
        }
    ERR_clear_error();
    return found;
}

/* How many CAs of cas bear ca's name (2 or more: a key rollover). */
int same_name(const cert_list &cas, X509 *ca)
{
    int n = 0;
    for (const auto &other : cas)
        n += X509_NAME_cmp(X509_get_subject_name(other.get()), X509_get_subject_name(ca)) == 0;
    return n;
}

/* Whether crl's authorityKeyIdentifier names ca's key (its subject key
 * identifier): what OpenSSL picks a list by when two CAs share a name. */
bool akid_names(X509 *ca, X509_CRL *crl)
{
    auto *akid = static_cast<AUTHORITY_KEYID *>(
        X509_CRL_get_ext_d2i(crl, NID_authority_key_identifier, nullptr, nullptr));
    const bool named = akid && akid->keyid && X509_get0_subject_key_id(ca) &&
                       X509_check_akid(ca, akid) == X509_V_OK;
    AUTHORITY_KEYID_free(akid);
    return named;
}

enum list_state { LIST_NONE, LIST_OWN, LIST_AMBIGUOUS };

/* Whether crls hold a list of ca's: in its name and signed by its key (of
 * two CAs with one name each needs its own), and, when another list bears
 * the same name, one OpenSSL can tell apart by its authorityKeyIdentifier
 * (else it may check a peer against the other CA's list, and refuse it). */
list_state own_list(X509 *ca, const crl_list &crls)
{
    int named = 0;
    for (const auto &crl : crls)
        named += X509_NAME_cmp(X509_get_subject_name(ca), X509_CRL_get_issuer(crl.get())) == 0;
    const bool shared = named > 1;
    list_state state = LIST_NONE;
    for (const auto &crl : crls) {
        if (X509_NAME_cmp(X509_get_subject_name(ca), X509_CRL_get_issuer(crl.get())) != 0 ||
            X509_CRL_verify(crl.get(), X509_get0_pubkey(ca)) != 1)
            continue;
        state = !shared || akid_names(ca, crl.get()) ? LIST_OWN : LIST_AMBIGUOUS;
        if (state == LIST_OWN)
            break;
    }
    ERR_clear_error();
    return state;
}

/* ca's name, with its serial number when another CA of cas has the same
 * name: "CN=ldct test ca (serial 1F03)". */
std::string ca_text(const cert_list &cas, X509 *ca)
{
    std::string s = name_text(X509_get_subject_name(ca));
    if (same_name(cas, ca) < 2)
        return s;
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(ca), nullptr);
    char *hex = bn ? BN_bn2hex(bn) : nullptr;
    s += std::string(" (serial ") + (hex ? hex : "?") + ")";
    OPENSSL_free(hex);
    BN_free(bn);
    ERR_clear_error();
    return s;
}

/* A list in the file that bears the name of one of our CAs but not its
 * signature, or that its CA may not sign: every peer of that CA would be
 * refused, so the file is. */
int check_crl_signatures(const scp_tls *t, char *err, size_t len)
{
    const cert_list cas = read_certs(t->ca_file);
    for (const auto &crl : read_crls(t->crl_file)) {
        const int r = crl_issuer(cas, crl.get());
        if (r >= 0)
            continue;
        scp__set_err(err, len, "the revocation list from %s in %s is %s in %s",
                     name_text(X509_CRL_get_issuer(crl.get())).c_str(), t->crl_file,
                     r == -1 ? "not signed by that CA's key"
                             : "signed by a CA whose keyUsage leaves out cRLSign",
                     t->ca_file);
        return LDCT_EINVAL_CONFIG;
    }
    return 0;
}

/* The revocation lists a peer's own certificate is checked against (the
 * leaf only: OpenSSL then also refuses a peer whose CA has no list here).
 * Every list in the file is loaded (X509_load_crl_file reads them all from
 * PEM); a file with none is an error rather than a check that refuses all,
 * and so is one with a list that its CA did not sign. */
int load_crl(DcmTLSTransportLayer &l, const scp_tls *t, char *err, size_t len)
{
    if (!set(t->crl_file))
        return 0;
    X509_STORE *store = SSL_CTX_get_cert_store(l.getNativeHandle());
    X509_LOOKUP *file = store ? X509_STORE_add_lookup(store, X509_LOOKUP_file()) : nullptr;
    const int n = file ? X509_load_crl_file(file, t->crl_file, X509_FILETYPE_PEM) : 0;
    ERR_clear_error();
    if (n <= 0) {
        scp__set_err(err, len, "cannot read the TLS certificate revocation list %s (PEM)",
                     t->crl_file);
        return LDCT_EINVAL_CONFIG;
    }
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK);
    return check_crl_signatures(t, err, len);
}

/* The CA certificates peers must chain to, and how a peer's certificate is
 * treated. */
int load_trust(DcmTLSTransportLayer &l, const scp_tls *t, int role_scp, char *err, size_t len)
{
    const bool need = !role_scp || t->require_peer;
    if (!set(t->ca_file)) {
        if (!need) {
            l.setCertificateVerification(DCV_ignoreCertificate);
            return 0;
        }
        scp__set_err(err, len, "%s",
                     role_scp ? "tls_require_client_certificate needs tls_ca_certificates"
                              : "a TLS destination needs tls_ca_certificates to verify the peer");
        return LDCT_EINVAL_CONFIG;
    }
    if (l.addTrustedCertificateFile(t->ca_file, DCF_Filetype_PEM).bad() ||
        (role_scp && l.addTrustedClientCertificateFile(t->ca_file).bad())) {
        scp__set_err(err, len, "cannot read the TLS CA certificates %s (PEM)", t->ca_file);
        return LDCT_EINVAL_CONFIG;
    }
    l.setCertificateVerification(need ? DCV_requireCertificate : DCV_checkCertificate);
    return load_crl(l, t, err, len);
}

/* t as Unix seconds; 0 when there is none or it does not convert. */
int64_t unix_seconds(const ASN1_TIME *t)
{
    struct tm tm = {};
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

/* The notAfter of the first certificate in path. */
int read_not_after(const char *path, int64_t *out)
{
    FILE *f = fopen(path, "r");
    X509 *x = f ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
    if (f)
        fclose(f);
    if (!x)
        return -1;
    *out = unix_seconds(X509_get0_notAfter(x));
    X509_free(x);
    return 0;
}

/* Lowers *out to the earliest notAfter of the certificates in path after
 * the first `skip`, and names that one's subject in name. Not a PEM file
 * or none in it: nothing changes. */
void read_earliest_not_after(const char *path, int skip, int64_t *out, char *name, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    for (int i = 0;; i++) {
        X509 *x = PEM_read_X509(f, nullptr, nullptr, nullptr);
        if (!x)
            break;
        const int64_t t = i < skip ? 0 : unix_seconds(X509_get0_notAfter(x));
        if (t > 0 && (*out == 0 || t < *out)) {
            *out = t;
            X509_NAME_oneline(X509_get_subject_name(x), name, (int)len);
        }
        X509_free(x);
    }
    fclose(f);
}

/* The earliest nextUpdate of the lists in path (0: none says). */
int read_next_update(const char *path, int64_t *out)
{
    const crl_list crls = read_crls(path);
    for (const auto &crl : crls) {
        const int64_t t = unix_seconds(X509_CRL_get0_nextUpdate(crl.get()));
        if (t > 0 && (*out == 0 || t < *out))
            *out = t;
    }
    return crls.empty() ? -1 : 0;
}

} // namespace

X509 *scp__tls_peer_certificate(T_ASC_Association *assoc)
{
    const unsigned long n = ASC_getPeerCertificateLength(assoc);
    if (n == 0 || n > (1u << 20))
        return nullptr;
    std::vector<unsigned char> der(n);
    if (ASC_getPeerCertificate(assoc, der.data(), n) != n)
        return nullptr;
    const unsigned char *p = der.data();
    X509 *x = d2i_X509(nullptr, &p, (long)n);
    ERR_clear_error();
    return x;
}

std::string scp__tls_subject(const X509 *x)
{
    return x ? name_text(X509_get_subject_name(x)) : std::string("?");
}

/* "DNS:a, IP:10.0.0.2" from one subjectAltName entry list. */
static std::string alt_names_text(const GENERAL_NAMES *names)
{
    std::string out;
    for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
        const GENERAL_NAME *g = sk_GENERAL_NAME_value(names, i);
        std::string one;
        if (g->type == GEN_DNS)
            one = "DNS:" + std::string((const char *)ASN1_STRING_get0_data(g->d.dNSName),
                                       (size_t)ASN1_STRING_length(g->d.dNSName));
        else if (g->type == GEN_IPADD) {
            char ip[INET6_ADDRSTRLEN] = "?";
            const int len = ASN1_STRING_length(g->d.iPAddress);
            if (len == 4 || len == 16)
                inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(g->d.iPAddress), ip,
                          sizeof ip);
            one = std::string("IP:") + ip;
        }
        if (!one.empty())
            out += (out.empty() ? "" : ", ") + one;
    }
    return out;
}

std::string scp__tls_alt_names(const X509 *x)
{
    if (!x)
        return std::string();
    auto *names = (GENERAL_NAMES *)X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr);
    std::string out = names ? alt_names_text(names) : std::string();
    GENERAL_NAMES_free(names);
    ERR_clear_error();
    return out;
}

extern "C" int scp_assoc_tls_peer_is(const scp_assoc_info *a, const char *name)
{
    X509 *x = static_cast<X509 *>(const_cast<void *>(a->tls_peer));
    if (!a->tls || !x || !name || !*name)
        return 0;
    unsigned char ip[16];
    const bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    /* No wildcards: one *.hospital.org certificate would stand for every
     * bound scanner of the domain. */
    const int r = is_ip ? X509_check_ip_asc(x, name, 0)
                        : X509_check_host(x, name, 0, X509_CHECK_FLAG_NO_WILDCARDS, nullptr);
    ERR_clear_error();
    return r == 1;
}

int scp__tls_peer_name(X509_VERIFY_PARAM *p, const char *name)
{
    unsigned char ip[16];
    const bool is_ip = inet_pton(AF_INET, name, ip) == 1 || inet_pton(AF_INET6, name, ip) == 1;
    /* No wildcards, as for bound callers: a *.hospital.org certificate from
     * the DICOM CA would otherwise pass as the PACS. */
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_WILDCARDS);
    return is_ip ? X509_VERIFY_PARAM_set1_ip_asc(p, name) : X509_VERIFY_PARAM_set1_host(p, name, 0);
}

void scp__socket_timeouts(int fd, int seconds)
{
    struct timeval tv = {seconds, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void scp__tls_init(void)
{
    std::call_once(g_openssl, [] { DcmTLSTransportLayer::initializeOpenSSL(); });
}

int scp__tls_configure(DcmTLSTransportLayer &l, const scp_tls *t, int role_scp, char *err,
                       size_t len)
{
    if (!l) {
        scp__set_err(err, len, "cannot create a TLS context (OpenSSL)");
        return LDCT_EDICOM;
    }
    const DcmTLSSecurityProfile profile = t->legacy ? TSP_Profile_BCP195 : TSP_Profile_BCP195_ND;
    if (l.setTLSProfile(profile).bad() || l.activateCipherSuites().bad()) {
        scp__set_err(err, len, "OpenSSL does not offer the BCP 195 TLS profile");
        return LDCT_EDICOM;
    }
    /* DCMTK leaves OpenSSL's security level at 0; level 2 refuses keys under
     * 2048 bits and SHA-1 signatures, as BCP 195 asks (not with fallback). */
    if (!t->legacy)
        SSL_CTX_set_security_level(l.getNativeHandle(), 2);
    int rc = load_identity(l, t, role_scp, err, len);
    return rc ? rc : load_trust(l, t, role_scp, err, len);
}

OFCondition scp__tls_verify_reason(const OFCondition &c, SSL *ssl)
{
    const long v = SSL_get_verify_result(ssl);
    if (v == X509_V_OK)
        return c;
    const std::string text = std::string(c.text()) + " (" + X509_verify_cert_error_string(v) + ")";
    return makeOFCondition(c.module(), c.code(), c.status(), text.c_str());
}

extern "C" int scp_tls_dates_read(const scp_tls *tls, scp_tls_dates *out, char *err, size_t err_len)
{
    *out = scp_tls_dates{};
    int rc = 0;
    if (set(tls->certificate) && read_not_after(tls->certificate, &out->certificate_not_after)) {
        scp__set_err(err, err_len, "cannot read the TLS certificate %s (PEM)", tls->certificate);
        rc = LDCT_EINVAL_CONFIG;
    }
    if (!rc && set(tls->certificate))
        read_earliest_not_after(tls->certificate, 1, &out->ca_not_after, out->ca_name,
                                sizeof out->ca_name);
    if (!rc && set(tls->ca_file))
        read_earliest_not_after(tls->ca_file, 0, &out->ca_not_after, out->ca_name,
                                sizeof out->ca_name);
    if (!rc && set(tls->crl_file) && read_next_update(tls->crl_file, &out->crl_next_update)) {
        scp__set_err(err, err_len, "cannot read the TLS certificate revocation list %s (PEM)",
                     tls->crl_file);
        rc = LDCT_EINVAL_CONFIG;
    }
    ERR_clear_error();
    return rc;
}

extern "C" int scp_tls_crl_gaps(const scp_tls *tls, void (*each)(void *ctx, const char *text),
                                void *ctx)
{
    try {
        if (!set(tls->crl_file) || !set(tls->ca_file))
            return 0;
        const cert_list cas = read_certs(tls->ca_file);
        const crl_list crls = read_crls(tls->crl_file);
        int n = 0;
        for (const auto &ca : cas) {
            const list_state state = own_list(ca.get(), crls);
            if (state == LIST_OWN)
                continue;
            const std::string text =
                state == LIST_NONE
                    ? "no revocation list from " + ca_text(cas, ca.get()) +
                          ": peers with certificates it issued are refused (a CA that issues"
                          " only intermediate CAs needs none)"
                    : "the revocation list from " + ca_text(cas, ca.get()) +
                          " has no authorityKeyIdentifier naming that CA's key, and another list"
                          " has its name: OpenSSL may check its peers against the other list"
                          " and refuse them (make the lists with authorityKeyIdentifier ="
                          " keyid)";
            each(ctx, text.c_str());
            n++;
        }
        for (const auto &crl : crls)
            if (crl_issuer(cas, crl.get()) == 0) {
                const std::string text = "the revocation list from " +
                                         name_text(X509_CRL_get_issuer(crl.get())) +
                                         " is not used: that CA is not in tls_ca_certificates";
                each(ctx, text.c_str());
                n++;
            }
        return n;
    } catch (...) {
        return 0;
    }
}

extern "C" int scp_tls_ctx_new(const scp_tls *tls, scp_tls_ctx **out, char *err, size_t err_len)
{
    *out = nullptr;
    try {
        scp__tls_init();
        std::unique_ptr<scp_tls_ctx> c(new scp_tls_ctx);
        c->layer = std::make_shared<DcmTLSTransportLayer>(NET_REQUESTOR, nullptr, OFFalse);
        int rc = scp__tls_configure(*c->layer, tls, 0, err, err_len);
        if (rc == 0)
            *out = c.release();
        return rc;
    } catch (...) {
        scp__set_err(err, err_len, "TLS setup failed (exception)");
        return LDCT_EDICOM;
    }
}

extern "C" scp_tls_ctx *scp_tls_ctx_ref(const scp_tls_ctx *c)
{
    if (!c)
        return nullptr;
    try {
        return new scp_tls_ctx{c->layer};
    } catch (...) {
        return nullptr;
    }
}

extern "C" void scp_tls_ctx_free(scp_tls_ctx *c)
{
    delete c;
}

extern "C" int scp_tls_check(const scp_tls *tls, int role_scp, char *err, size_t err_len)
{
    try {
        if (!tls)
            return -EINVAL;
        scp__tls_init();
        DcmTLSTransportLayer l(role_scp ? NET_ACCEPTOR : NET_REQUESTOR, nullptr, OFFalse);
        return scp__tls_configure(l, tls, role_scp, err, err_len);
    } catch (...) {
        scp__set_err(err, err_len, "TLS setup failed (exception)");
        return LDCT_EDICOM;
    }
}
