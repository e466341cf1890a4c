/*
 * silver_rights.c: runs a silver declaration's SQL with the declaring role's rights.
 *
 * A silver table's expressions are written by whoever declared it (a lakehouse_admin
 * member, not necessarily a superuser), but passes run inside SECURITY DEFINER functions
 * and the silver worker, both as the superuser. These two functions switch the current
 * user to the declaring role for one statement, as PostgreSQL itself does for index
 * expressions during VACUUM or REFRESH MATERIALIZED VIEW: SECURITY_RESTRICTED_OPERATION
 * forbids SET ROLE, temporary objects and the like inside, so nothing in the expressions
 * can climb back to the superuser. The functions that hold the expressions are owned by
 * the extension's owner, so the declaring role cannot change them either. Both refuse
 * callers that are not superusers, and the user is restored on every path (an error
 * restores it through PG_FINALLY and again at transaction or subtransaction abort).
 *
 * Settings too: the declaring role's SQL could call set_config('search_path', ...,
 * false), which outlives a function's SET clause and would hand the rest of the pass,
 * run as the superuser, a search_path of the role's choosing. Like PostgreSQL around its
 * own restricted operations, a GUC nest level is opened before the switch and closed
 * (every change made inside undone) after it; on an error the (sub)transaction's abort
 * undoes them.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(lakehouse_exec_as);
PG_FUNCTION_INFO_V1(lakehouse_select_array_as);

static void
check_caller_and_role(Oid role)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only a superuser may run SQL as another role through lakehouse"),
				 errhint("This is an internal function of lakehouse's silver passes.")));
	if (!SearchSysCacheExists1(AUTHOID, ObjectIdGetDatum(role)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("role with OID %u does not exist", role),
				 errhint("The role that declared the silver table was dropped; declare the table again.")));
}

/*
 * Checks the caller and the role, opens a GUC nest level, then makes role the current
 * user, restricted. Returns the nest level, which the caller closes with
 * AtEOXact_GUC(false, nestlevel) once the user is back.
 */
static int
switch_to_role(Oid role, Oid *saved_user, int *saved_context)
{
	int			nestlevel;

	check_caller_and_role(role);
	GetUserIdAndSecContext(saved_user, saved_context);
	nestlevel = NewGUCNestLevel();
	SetUserIdAndSecContext(role, *saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	return nestlevel;
}

/* lakehouse._exec_as(role oid, sql text): runs sql (no result wanted) as role. */
Datum
lakehouse_exec_as(PG_FUNCTION_ARGS)
{
	Oid			role = PG_GETARG_OID(0);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			saved_user;
	int			saved_context;
	int			nestlevel;

	nestlevel = switch_to_role(role, &saved_user, &saved_context);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "lakehouse: SPI_connect failed");
		if (SPI_execute(sql, false, 0) < 0)
			elog(ERROR, "lakehouse: could not run the statement as role %u", role);
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_user, saved_context);
	}
	PG_END_TRY();
	AtEOXact_GUC(false, nestlevel);
	PG_RETURN_VOID();
}

/*
 * lakehouse._select_array_as(role oid, sql text, template anyarray, p1 bigint, p2 bigint,
 * p3 integer[], p4 bigint[], p5 bigint[], p6 timestamptz) RETURNS anyarray: runs sql,
 * which takes $1..$6 and returns one row with one column of template's type, as role, and
 * returns that array. The shape fits the silver extract functions.
 */
Datum
lakehouse_select_array_as(PG_FUNCTION_ARGS)
{
	Oid			role = PG_GETARG_OID(0);
	char	   *sql = text_to_cstring(PG_GETARG_TEXT_PP(1));
	Oid			result_type = get_fn_expr_argtype(fcinfo->flinfo, 2);
	Oid			argtypes[6] = {INT8OID, INT8OID, INT4ARRAYOID, INT8ARRAYOID, INT8ARRAYOID, TIMESTAMPTZOID};
	Datum		values[6];
	char		nulls[6];
	Oid			saved_user;
	int			saved_context;
	int			nestlevel;
	Datum		result = (Datum) 0;
	bool		result_null = true;
	MemoryContext caller_context = CurrentMemoryContext;

	if (!OidIsValid(result_type) || !type_is_array(result_type))
		elog(ERROR, "lakehouse._select_array_as: the template must be an array");
	for (int i = 0; i < 6; i++)
	{
		nulls[i] = PG_ARGISNULL(i + 3) ? 'n' : ' ';
		values[i] = PG_ARGISNULL(i + 3) ? (Datum) 0 : PG_GETARG_DATUM(i + 3);
	}

	nestlevel = switch_to_role(role, &saved_user, &saved_context);
	PG_TRY();
	{
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "lakehouse: SPI_connect failed");
		if (SPI_execute_with_args(sql, 6, argtypes, values, nulls, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "lakehouse: the statement run as role %u returned no row", role);
		if (SPI_gettypeid(SPI_tuptable->tupdesc, 1) != result_type)
			elog(ERROR, "lakehouse: the statement run as role %u returned %s, not %s", role,
				 format_type_be(SPI_gettypeid(SPI_tuptable->tupdesc, 1)), format_type_be(result_type));
		result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &result_null);
		if (!result_null)
		{
			/* Out of SPI's memory before SPI_finish frees it. */
			MemoryContext spi_context = MemoryContextSwitchTo(caller_context);

			result = PointerGetDatum(PG_DETOAST_DATUM_COPY(result));
			MemoryContextSwitchTo(spi_context);
		}
		SPI_finish();
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(saved_user, saved_context);
	}
	PG_END_TRY();
	AtEOXact_GUC(false, nestlevel);
	if (result_null)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
