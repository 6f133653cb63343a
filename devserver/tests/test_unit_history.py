from dex.dexpb import dex_pb2 as pb

from dex_devserver._history import blob_values, event_json, new_event


def test_blob_references_are_found_in_nested_repeated_and_map_fields() -> None:
    event = new_event(7)
    completed = event.step_execute_completed
    completed.input.attributes.add(key="big", value=pb.Value(internal_blob_id_for_string_value="s-1"))
    completed.input.attributes.add(key="small", value=pb.Value(string_value="x"))
    completed.output.step_decision.next_steps.add(
        step_type="Next", step_input=pb.Value(internal_blob_id_for_obj_value="o-2")
    )
    state = pb.GetFlowStateResponse()
    state.pending_channel_messages["inbox"].messages.add(
        value=pb.Value(internal_blob_id_for_string_value="s-3")
    )
    found = [
        v.internal_blob_id_for_string_value or v.internal_blob_id_for_obj_value for v in blob_values(event)
    ]
    assert found == ["s-1", "o-2"]
    assert [v.internal_blob_id_for_string_value for v in blob_values(state)] == ["s-3"]


def test_event_json_has_the_dexcli_shape() -> None:
    event = new_event(3)
    event.flow_closed.flow_status = pb.FLOW_STATUS_COMPLETED
    rendered = event_json(event)
    assert rendered["eventId"] == "3"
    assert rendered["type"] == "FlowClosed"
    assert rendered["payload"] == {"flowStatus": "FLOW_STATUS_COMPLETED"}
    assert rendered["eventTime"].endswith("Z")
