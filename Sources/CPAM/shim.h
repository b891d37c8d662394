#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <syslog.h>

/* pam_syslog is variadic, which Swift cannot call: this logs one finished message. */
static inline void latchkey_pam_log(pam_handle_t *handle, int priority, const char *message) {
    pam_syslog(handle, priority, "%s", message);
}
