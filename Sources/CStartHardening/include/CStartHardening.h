#ifndef LATCHKEY_C_START_HARDENING_H
#define LATCHKEY_C_START_HARDENING_H

/// What the image-start constructor did: 0 when it made the process non-dumpable and set RLIMIT_CORE to 0,
/// else the errno of the call that failed. Linking latchkeyd against this target runs the constructor
/// before Swift's runtime and `main`.
int latchkey_start_hardening_error(void);

#endif
