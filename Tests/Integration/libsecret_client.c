/* A libsecret-1 client for the integration tests: stores, looks up, searches
 * and clears with a schema, checks the SecretService proxy (DH session) and
 * the default alias. Prints "OK" and exits 0 when everything matched. */
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static const SecretSchema schema = {
    "org.latchkey.Test", SECRET_SCHEMA_NONE,
    {
        {"number", SECRET_SCHEMA_ATTRIBUTE_INTEGER},
        {"string", SECRET_SCHEMA_ATTRIBUTE_STRING},
        {"even", SECRET_SCHEMA_ATTRIBUTE_BOOLEAN},
        {NULL, 0},
    }};

#define CHECK(condition, ...)                                  \
    do {                                                       \
        if (!(condition)) {                                    \
            fprintf(stderr, "FAILED %s: ", #condition);        \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, "\n");                             \
            return 1;                                          \
        }                                                      \
    } while (0)

static const char *message(GError *error) { return error ? error->message : "(no error)"; }

int main(void) {
    GError *error = NULL;
    gboolean stored = secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, "Label eight", "the password",
                                                 NULL, &error, "number", 8, "string", "eight", "even", TRUE, NULL);
    CHECK(stored && error == NULL, "store: %s", message(error));
    stored = secret_password_store_sync(&schema, SECRET_COLLECTION_DEFAULT, "Label nine", "other password", NULL,
                                        &error, "number", 9, "string", "nine", "even", FALSE, NULL);
    CHECK(stored, "store 9: %s", message(error));

    gchar *password = secret_password_lookup_sync(&schema, NULL, &error, "number", 8, "string", "eight", "even",
                                                  TRUE, NULL);
    CHECK(password != NULL && strcmp(password, "the password") == 0, "lookup: %s", message(error));
    secret_password_free(password);

    SecretService *service =
        secret_service_get_sync(SECRET_SERVICE_OPEN_SESSION | SECRET_SERVICE_LOAD_COLLECTIONS, NULL, &error);
    CHECK(service != NULL, "service: %s", message(error));
    const gchar *algorithms = secret_service_get_session_algorithms(service);
    CHECK(algorithms && strcmp(algorithms, "dh-ietf1024-sha256-aes128-cbc-pkcs7") == 0, "algorithm %s",
          algorithms ? algorithms : "(none)");

    GHashTable *attributes = secret_attributes_build(&schema, "even", TRUE, NULL);
    GList *items = secret_service_search_sync(
        service, &schema, attributes, SECRET_SEARCH_ALL | SECRET_SEARCH_UNLOCK | SECRET_SEARCH_LOAD_SECRETS, NULL,
        &error);
    g_hash_table_unref(attributes);
    CHECK(error == NULL && g_list_length(items) == 1, "search: %u items, %s", g_list_length(items),
          message(error));
    SecretItem *item = items->data;
    gchar *label = secret_item_get_label(item);
    CHECK(strcmp(label, "Label eight") == 0, "label %s", label);
    g_free(label);
    SecretValue *value = secret_item_get_secret(item);
    CHECK(value && strcmp(secret_value_get_text(value), "the password") == 0, "secret");
    secret_value_unref(value);
    GHashTable *found = secret_item_get_attributes(item);
    CHECK(g_strcmp0(g_hash_table_lookup(found, "xdg:schema"), "org.latchkey.Test") == 0 &&
              g_strcmp0(g_hash_table_lookup(found, "number"), "8") == 0 &&
              g_strcmp0(g_hash_table_lookup(found, "even"), "true") == 0,
          "attributes");
    g_hash_table_unref(found);
    g_list_free_full(items, g_object_unref);

    SecretCollection *collection = secret_collection_for_alias_sync(service, SECRET_COLLECTION_DEFAULT,
                                                                    SECRET_COLLECTION_LOAD_ITEMS, NULL, &error);
    CHECK(collection != NULL, "alias: %s", message(error));
    CHECK(strcmp(g_dbus_proxy_get_object_path(G_DBUS_PROXY(collection)),
                 "/org/freedesktop/secrets/collection/login") == 0,
          "default alias path %s", g_dbus_proxy_get_object_path(G_DBUS_PROXY(collection)));
    gchar *collection_label = secret_collection_get_label(collection);
    CHECK(strcmp(collection_label, "Login") == 0, "collection label %s", collection_label);
    g_free(collection_label);
    GList *all = secret_collection_get_items(collection);
    CHECK(g_list_length(all) == 2, "collection has %u items", g_list_length(all));
    g_list_free_full(all, g_object_unref);
    g_object_unref(collection);

    gboolean cleared = secret_password_clear_sync(&schema, NULL, &error, "number", 8, NULL);
    CHECK(cleared, "clear: %s", message(error));
    password = secret_password_lookup_sync(&schema, NULL, &error, "number", 8, NULL);
    CHECK(password == NULL && error == NULL, "lookup after clear");
    password = secret_password_lookup_sync(&schema, NULL, &error, "number", 9, NULL);
    CHECK(password != NULL && strcmp(password, "other password") == 0, "nine survives");
    secret_password_free(password);
    g_object_unref(service);
    printf("OK\n");
    return 0;
}
