/* A libsecret-1 client that, like git-credential-libsecret, makes its item objects while the login collection
 * is locked and runs no main loop: it prints each item's label and attributes as it read them then, unlocks the
 * collection (secret_service_unlock_sync: the daemon's prompt), and prints them again from the same objects.
 * Without a main loop, libsecret's item objects never take in a PropertiesChanged or ItemChanged: what they
 * show after the unlock is what they read while locked (their Locked property too: libsecret updates that of
 * the objects it was asked to unlock, the collection, only). */
#include <libsecret/secret.h>
#include <stdio.h>
#include <string.h>

static void print_items(const char *when, GList *items) {
    for (GList *l = items; l != NULL; l = l->next) {
        SecretItem *item = l->data;
        gchar *label = secret_item_get_label(item);
        GHashTable *attributes = secret_item_get_attributes(item);
        const gchar *user = g_hash_table_lookup(attributes, "user");
        printf("%s label='%s' user='%s'\n", when, label, user ? user : "");
        g_hash_table_unref(attributes);
        g_free(label);
    }
}

int main(void) {
    GError *error = NULL;
    SecretService *service = secret_service_get_sync(SECRET_SERVICE_LOAD_COLLECTIONS, NULL, &error);
    if (service == NULL) {
        fprintf(stderr, "service: %s\n", error->message);
        return 1;
    }
    SecretCollection *login =
        secret_collection_for_alias_sync(service, "login", SECRET_COLLECTION_LOAD_ITEMS, NULL, &error);
    if (login == NULL) {
        fprintf(stderr, "login collection: %s\n", error ? error->message : "none");
        return 1;
    }
    GList *items = secret_collection_get_items(login);
    print_items("before", items);
    GList *objects = g_list_append(NULL, login);
    gint unlocked = secret_service_unlock_sync(service, objects, NULL, NULL, &error);
    if (error != NULL) {
        fprintf(stderr, "unlock: %s\n", error->message);
        return 1;
    }
    printf("unlocked %d\n", unlocked);
    print_items("after", items);
    g_list_free(objects);
    g_list_free_full(items, g_object_unref);
    g_object_unref(login);
    g_object_unref(service);
    return 0;
}
