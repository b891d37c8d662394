/* A libsecret-1 client for the access-prompt tests: "store KEY SECRET" stores a password under the attribute
 * key=KEY (replacing the item with that attribute, as secret_password_store does); "lookup KEY" prints the
 * password (libsecret reads it with GetSecrets); "clear KEY" deletes the items with key=KEY. On failure, the
 * D-Bus error's name and message go to standard error, and it exits 2. Copied to another path with other bytes, it is
 * another application to the daemon. */
#include <gio/gio.h>
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static const SecretSchema schema = {
    "org.latchkey.AccessTest", SECRET_SCHEMA_NONE, {{"key", SECRET_SCHEMA_ATTRIBUTE_STRING}, {NULL, 0}}};

static int failed(const char *what, GError *error) {
    gchar *name = error ? g_dbus_error_get_remote_error(error) : NULL;
    fprintf(stderr, "%s: %s: %s\n", what, name ? name : "(no D-Bus error)", error ? error->message : "(none)");
    g_free(name);
    return 2;
}

int main(int argc, char **argv) {
    GError *error = NULL;
    if (argc == 4 && strcmp(argv[1], "store") == 0) {
        if (!secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, argv[2], argv[3], NULL, &error, "key",
                                        argv[2], NULL))
            return failed("store", error);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "lookup") == 0) {
        gchar *password = secret_password_lookup_sync(&schema, NULL, &error, "key", argv[2], NULL);
        if (error != NULL) return failed("lookup", error);
        if (password == NULL) {
            fprintf(stderr, "lookup: no such item\n");
            return 3;
        }
        printf("%s\n", password);
        secret_password_free(password);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "clear") == 0) {
        if (!secret_password_clear_sync(&schema, NULL, &error, "key", argv[2], NULL)) {
            if (error != NULL) return failed("clear", error);
            fprintf(stderr, "clear: no such item\n");
            return 3;
        }
        return 0;
    }
    fprintf(stderr, "usage: access_client store KEY SECRET | lookup KEY | clear KEY\n");
    return 1;
}
