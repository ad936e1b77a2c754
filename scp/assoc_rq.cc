/* scp/assoc_rq.cc: the item structure of an A-ASSOCIATE-RQ, checked before
 * DCMTK parses it.
 *
 * Why: DCMTK 3.6.7 (Debian's libdcmtk17) leaks what it has built from a
 * request it then refuses: the transfer syntax list of a presentation
 * context whose sub-items break (parsePresentationContext frees only the
 * context), an extended negotiation sub-item that fails (never deleted),
 * the extended negotiation sub-items parsed before any later failure
 * (destroyUserInformationLists deletes the list, not its members), and,
 * when a presentation context has no transfer syntax, every list of the
 * request (AE_6_ExamineAssociateRequest returns DUL_PCTRANSLATIONFAILURE
 * without freeing them). Any peer that may connect could grow the daemon
 * that way, by over 100 bytes for each 4-byte transfer syntax sub-item.
 *
 * Invariant: every rule here is a refusal of DCMTK's own (dulparse.cc's
 * parseAssociate and what it calls, then translatePresentationContextList
 * in dulfsm.cc), reached along the same walk through the items, so a
 * request refused here is one DCMTK refuses too; it only never gets to
 * build (and leak) anything. Where this walk cannot be sure to follow
 * DCMTK's (a user identity sub-item whose fields do not fill it, a broken
 * asynchronous operations sub-item) it stops and lets DCMTK judge the rest
 * of that user information item.
 *
 * Sources: DCMTK's dulparse.cc, dulfsm.cc and dcuserid.cc as stored for
 * releases around 3.6.7 (not that exact tag); every refusal named below is
 * a message of Debian's libdcmnet.so.17, and the installed library gave
 * the same answer (closed or A-ASSOCIATE-AC) with and without this check
 * to 56 crafted and 1500 seeded random requests (docs/NOTES-review6.md,
 * review 26).
 *
 * Pure function of its input; any thread may call it.
 */
#include "scp/internal.hh"

namespace
{

unsigned be16(const unsigned char *b)
{
    return (unsigned)b[0] << 8 | b[1];
}

const size_t k_max_uid = 64; /* DICOM_UI_LENGTH */

/* parseSubItem (application context, abstract and transfer syntax,
 * implementation class UID and version name): needs 4 bytes, refuses a
 * value over 64 bytes ("DUL illegal subitem length") and one past what
 * its parent has left ("DUL Illegal subitem"). */
const char *sub_item(const unsigned char *p, size_t left)
{
    if (left < 4)
        return "a sub-item header cut short";
    if (be16(p + 2) > k_max_uid)
        return "a UID sub-item over 64 bytes";
    if (be16(p + 2) > left - 4)
        return "a sub-item longer than its parent";
    return nullptr;
}

/* parseDummy (items and sub-items DCMTK skips): 4 bytes, within the parent
 * ("DUL Illegal dummy item"). */
const char *dummy(const unsigned char *p, size_t left)
{
    if (left < 4)
        return "an item header cut short";
    if (be16(p + 2) > left - 4)
        return "an item longer than its parent";
    return nullptr;
}

/* parsePresentationContext, then translatePresentationContextList. `p` is
 * the item; the caller has checked its length fits. Sub-items are walked as
 * DCMTK does (0x30 and 0x40 by parseSubItem, others by parseDummy, each
 * advancing 4 + its length); an A-ASSOCIATE-AC's context item (0x21) with a
 * nonzero result has its sub-items skipped, as DCMTK does. A context left
 * without a transfer syntax fails the translation ("DUL Peer supplied
 * illegal number of transfer syntaxes", returned as
 * DUL_PCTRANSLATIONFAILURE). */
const char *presentation_context(const unsigned char *p)
{
    size_t left = be16(p + 2) - 4;
    int syntaxes = 0;
    if (!(p[0] == 0x21 && p[6] != 0)) {
        for (const unsigned char *s = p + 8; left > 0;) {
            bool uid = s[0] == 0x30 || s[0] == 0x40;
            const char *why = uid ? sub_item(s, left) : dummy(s, left);
            if (why)
                return why;
            syntaxes += s[0] == 0x40;
            size_t n = 4 + be16(s + 2);
            s += n;
            left -= n;
        }
    }
    return syntaxes ? nullptr : "a presentation context without a transfer syntax";
}

/* UserIdentityNegotiationSubItemRQ::parseFromBuffer (dcuserid.cc; a
 * request's 0x58 and 0x59 sub-items): 10 bytes ("DUL user identity rq
 * length"), within the item, length >= 6 (EC_CorruptedData), primary and
 * then secondary field within it ("DUL illegal user identify rq length").
 * DCMTK then advances by the fields it read, the secondary one only for
 * identity type 2, not by the item's length: *n is 4 + the length when
 * both agree, else 0 (the walk stops there). */
const char *user_identity(const unsigned char *p, size_t left, size_t *n)
{
    *n = 0;
    if (left < 10)
        return "a user identity sub-item cut short";
    const char *why = dummy(p, left);
    if (why)
        return why;
    unsigned len = be16(p + 2), prim = be16(p + 6);
    if (len < 6 || prim > len - 6)
        return "a user identity sub-item whose fields run past it";
    unsigned sec = be16(p + 8 + prim);
    if (sec > len - 6 - prim)
        return "a user identity sub-item whose fields run past it";
    if (10 + prim + sec == 4 + len && (sec == 0 || p[4] == 2))
        *n = 4 + len;
    return nullptr;
}

/* parseUserInfo's sub-items; `p` and `left` are the item's value. */
const char *user_info(const unsigned char *p, size_t left)
{
    while (left > 0) {
        const char *why = nullptr;
        size_t n = 4 + (left >= 4 ? be16(p + 2) : 0);
        switch (p[0]) {
        case 0x51: /* parseMaxPDU: 8 bytes, within the item ("DUL Illegal Max PDU") */
            why = left < 8 ? "a maximum length sub-item cut short" : dummy(p, left);
            break;
        case 0x52: /* implementation class UID */
        case 0x55: /* implementation version name */
            why = sub_item(p, left);
            break;
        case 0x54: /* parseSCUSCPRole: 8 bytes, within the item, length >= 4,
                      UID within it ("DUL Illegal SCU-SCP role list [UID]") */
            if (left < 8)
                why = "a role selection sub-item cut short";
            else if (!(why = dummy(p, left)) && (be16(p + 2) < 4 || be16(p + 4) > be16(p + 2) - 4u))
                why = "a role selection sub-item whose UID runs past it";
            break;
        case 0x56: /* parseExtNeg: 6 bytes, within the item, length >= 2,
                      UID within it ("DUL Illegal extended negotiation") */
            if (left < 6)
                why = "an extended negotiation sub-item cut short";
            else if (!(why = dummy(p, left)) && (be16(p + 2) < 2 || be16(p + 4) > be16(p + 2) - 2u))
                why = "an extended negotiation sub-item whose UID runs past it";
            break;
        case 0x53: /* asynchronous operations window: skipped like parseDummy,
                      but DCMTK may go on after a broken one; followed only
                      when well-formed */
            if (dummy(p, left))
                return nullptr;
            break;
        case 0x58: /* user identity */
        case 0x59:
            why = user_identity(p, left, &n);
            if (!why && n == 0)
                return nullptr; /* not followed further: DCMTK judges the rest */
            break;
        default:
            why = dummy(p, left);
        }
        if (why)
            return why;
        p += n;
        left -= n;
    }
    return nullptr;
}

} // namespace

const char *scp__assoc_rq_fault(const unsigned char *body, size_t len)
{
    /* Fixed fields (protocol version to the 32 reserved bytes): DCMTK
     * refuses a shorter request before it builds anything. */
    const size_t fixed = 68;
    if (len < fixed)
        return nullptr;
    const unsigned char *p = body + fixed;
    for (size_t left = len - fixed; left > 0;) {
        const char *why = nullptr;
        switch (p[0]) {
        case 0x10: /* application context */
            why = sub_item(p, left);
            break;
        case 0x20: /* presentation context: 8 bytes, length >= 4, within
                      the PDU ("DUL Illegal presentation context") */
        case 0x21:
            if (left < 8 || be16(p + 2) < 4)
                why = "a presentation context item cut short";
            else if (!(why = dummy(p, left)))
                why = presentation_context(p);
            break;
        case 0x50: /* user information: within the PDU ("DUL Illegal user info") */
            if (!(why = dummy(p, left)))
                why = user_info(p + 4, be16(p + 2));
            break;
        default:
            why = dummy(p, left);
        }
        if (why)
            return why;
        size_t n = 4 + be16(p + 2);
        p += n;
        left -= n;
    }
    return nullptr;
}
