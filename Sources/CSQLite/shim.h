#include <sqlite3.h>

/* sqlite3_db_config is variadic, which Swift cannot call: turns on SQLITE_DBCONFIG_DEFENSIVE (no writes to the
   schema or other ways of corrupting the file through SQL) for a connection to a file someone else may have
   written. 0 on success. */
static inline int latchkey_sqlite_defensive(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
}
