/**
 * Enrich orders
 *
 * Reads args.variables.orders_to_enrich (a list of { order_id }), dispatches the enrich-order
 * sub-workflow for every order at once and returns [{ order_id, enrichment_file, delayed }].
 */
export default async function ({ variables, tools }) {
  const orders = variables.orders_to_enrich || [];
  const answers = await Promise.all(
    orders.map(({ order_id }) => tools.archmaxWorkflowEnrichOrder({ order_id })),
  );
  return answers.map((answer, i) => {
    const { returns } = JSON.parse(answer);
    return {
      order_id: orders[i].order_id,
      enrichment_file: returns.enrichment_file,
      delayed: returns.delayed,
    };
  });
}
