/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of s3.c and fetch.c's care of secrets (issue 38): a key
 * that cannot be copied (strdup wrapped to fail, -Wl,--wrap) is reported
 * as the lack of memory it is, not as a profile that lacks a key; URLs
 * with a password or a presigned query are refused without being named;
 * the headers of a signed request (the session token among them) are
 * wiped before they are freed (curl_slist_free_all wrapped to look).
 */

#include <sys/socket.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <curl/curl.h>

#include "fetch.h"
#include "runner.h"
#include "s3.h"

#define SECRET		"zzUnitSecretNeverShownK3"
#define TOKEN		"zzUnitTokenNeverShownT4"

char	*__real_strdup(const char *);
char	*__wrap_strdup(const char *);
void	 __real_curl_slist_free_all(struct curl_slist *);
void	 __wrap_curl_slist_free_all(struct curl_slist *);

static const char	*strdup_fails;	/* a strdup() of this fails */
static unsigned		 freed_lists, freed_secrets;

/* strdup(), failing with ENOMEM for strdup_fails. */
char *
__wrap_strdup(const char *s)
{
	if (strdup_fails != NULL && strcmp(s, strdup_fails) == 0) {
		errno = ENOMEM;
		return (NULL);
	}
	return (__real_strdup(s));
}

/* curl_slist_free_all(), counting the lists freed with a token in them. */
void
__wrap_curl_slist_free_all(struct curl_slist *l)
{
	struct curl_slist	*h;

	freed_lists += l != NULL;
	for (h = l; h != NULL; h = h->next)
		freed_secrets += strstr(h->data, TOKEN) != NULL;
	__real_curl_slist_free_all(l);
}

/* A credentials file in a new folder under TMPDIR; its path in @path. */
static void
write_credentials(char *path, size_t len, const char *body)
{
	const char	*tmp = getenv("TMPDIR");
	char		 d[512];

	snprintf(d, sizeof(d), "%s/infeed-test-XXXXXX", tmp ? tmp : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(d));
	snprintf(path, len, "%s/credentials", d);
	write_file(path, body, strlen(body));
}

/* Remove write_credentials()'s file and folder. */
static void
remove_credentials(const char *path)
{
	char	d[700], *slash;

	snprintf(d, sizeof(d), "%s", path);
	unlink(path);
	if ((slash = strrchr(d, '/')) != NULL)
		*slash = '\0';
	rmdir(d);
}

START_TEST(a_key_out_of_memory_is_named_so)
{
	struct s3_conf	 c = { 0 };
	char		 path[600], *cause = NULL;

	write_credentials(path, sizeof(path), "[default]\n"
	    "aws_access_key_id = AKIDUNIT\naws_secret_access_key = " SECRET
	    "\n");
	c.credentials = path;
	c.endpoint = "http://127.0.0.1:9";
	strdup_fails = SECRET;
	ck_assert_int_eq(s3_site_conf("s3://bucket/key", &c, &cause), -1);
	strdup_fails = NULL;
	ck_assert_ptr_nonnull(cause);
	ck_assert_msg(strstr(cause, strerror(ENOMEM)) != NULL &&
	    strstr(cause, "lacks") == NULL, "%s", cause);
	ck_assert_ptr_null(strstr(cause, SECRET));
	free(cause);
	cause = NULL;

	/* A profile that does lack a key still says so. */
	remove_credentials(path);
	write_credentials(path, sizeof(path), "[default]\n"
	    "aws_access_key_id = AKIDUNIT\n");
	ck_assert_int_eq(s3_site_conf("s3://bucket/key", &c, &cause), -1);
	ck_assert_msg(strstr(cause, "lacks a key") != NULL, "%s", cause);
	free(cause);
	remove_credentials(path);
}
END_TEST

START_TEST(urls_holding_secrets_are_refused_unnamed)
{
	static const char *const refused[] = {
		"https://h.example/s.tar?X-Amz-Algorithm=AWS4-HMAC-SHA256&"
		    "X-Amz-Credential=AKID%2F20260101&X-Amz-Signature=" SECRET,
		"https://h.example/s.tar?sv=2024&sig=" SECRET,
		"https://h.example/s.tar?download=1&access_token=" SECRET,
		"http://user:" SECRET "@h.example/s.tar",
		NULL
	};
	struct s3_conf	 c = { 0 };
	char		*cause;
	size_t		 i;

	for (i = 0; refused[i] != NULL; i++) {
		cause = NULL;
		ck_assert_int_eq(s3_site_conf(refused[i], &c, &cause), -1);
		ck_assert_ptr_nonnull(cause);
		ck_assert_msg(strstr(cause, SECRET) == NULL, "%s", cause);
		ck_assert_ptr_nonnull(strstr(cause, "refused"));
		free(cause);
	}
	/* A query without a secret is a URL like any other. */
	cause = NULL;
	ck_assert_int_eq(s3_site_conf("https://h.example/s.tar?download=1",
	    &c, &cause), 0);
	ck_assert_int_eq(s3_url_shown("https://h.example/a-{0..9}.tar",
	    &cause), 0);
}
END_TEST

/* A server that answers one HEAD: 200, 5 bytes. */
static void *
head_server(void *arg)
{
	static const char	ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n"
	    "Connection: close\r\n\r\n";
	char			req[4096];
	size_t			got = 0;
	ssize_t			n;
	int			fd = *(int *)arg, c;

	if ((c = accept(fd, NULL, NULL)) == -1)
		return (NULL);
	while (got < sizeof(req) - 1 && (n = read(c, req + got,
	    sizeof(req) - 1 - got)) > 0) {
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL)
			break;
	}
	(void)!write(c, ok, sizeof(ok) - 1);
	close(c);
	return (NULL);
}

START_TEST(signed_headers_are_wiped_before_free)
{
	struct sockaddr_in	 sin;
	struct fetch_site	 site = { 0 };
	struct fetch_object	 o;
	socklen_t		 len = sizeof(sin);
	pthread_t		 th;
	char			 prefix[64], url[128], *cause = NULL;
	int			 fd;

	ck_assert_int_ne(fd = socket(AF_INET, SOCK_STREAM, 0), -1);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, head_server, &fd), 0);
	snprintf(prefix, sizeof(prefix), "http://127.0.0.1:%d/",
	    ntohs(sin.sin_port));
	snprintf(url, sizeof(url), "s3://b/k");
	site.endpoint = prefix;
	site.region = (char *)"eu-test-1";
	site.access_key = (char *)"AKIDUNIT";
	site.secret_key = (char *)SECRET;
	site.token = (char *)TOKEN;
	ck_assert_int_eq(fetch_site_set("s3://b/", &site, &cause), 0);
	ck_assert_msg(fetch_head(url, &o, &cause) == 0, "%s", cause);
	pthread_join(th, NULL);
	close(fd);
	ck_assert_uint_eq(o.size, 5);
	ck_assert_uint_ge(freed_lists, 1);
	ck_assert_msg(freed_secrets == 0, "%u header lists freed with the "
	    "session token still in them", freed_secrets);
}
END_TEST

static Suite *
s3_suite(void)
{
	Suite	*s = suite_create("s3");
	TCase	*tc = tcase_create("secrets");

	tcase_add_test(tc, a_key_out_of_memory_is_named_so);
	tcase_add_test(tc, urls_holding_secrets_are_refused_unnamed);
	tcase_add_test(tc, signed_headers_are_wiped_before_free);
	suite_add_tcase(s, tc);
	return (s);
}

int
main(void)
{
	return (run_suite(s3_suite()));
}
