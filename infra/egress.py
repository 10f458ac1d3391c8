"""A fixed egress address (``egress: fixed``): the fetchers in private subnets, out through NAT gateways' Elastic IPs.

A site that allowlists addresses cannot be crawled from Lambda's shared ranges. With this setting
the functions that send the crawl's requests run in the private subnets of a VPC of their own,
whose only way out is one NAT gateway (or one per availability zone), each with an Elastic IP the
stack outputs: the addresses to hand to the site's owner (docs/operations.md).

DynamoDB and S3, where a crawl writes every page, are reached through gateway endpoints, which
cost nothing and keep that traffic off NAT's per-GB charge. SQS, Secrets Manager and Lambda's
own API go out through NAT: their bytes a page are a small fraction of a page's, and an interface
endpoint per service costs more a month than NAT charges for them (docs/costs.md has both).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Fn, RemovalPolicy, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import StackConfig

PUBLIC = "egress"
"""The public subnets: only the NAT gateways live there."""
PRIVATE = "fetchers"
"""The private subnets the functions that fetch run in."""


class FixedEgress(Construct):
    """The VPC, its NAT gateways with their Elastic IPs, the gateway endpoints, flow logs, and the fetchers' group."""

    def __init__(self, scope: Construct, id: str, *, config: StackConfig) -> None:
        super().__init__(scope, id)
        # Our own Elastic IPs, handed to the NAT gateways: their addresses are outputs, and an address
        # stays the same through any update that keeps its resource (a NAT gateway replaced keeps it).
        self.addresses = [ec2.CfnEIP(self, f"Address{n + 1}", domain="vpc") for n in range(config.nat_gateways)]
        for address in self.addresses:
            address.apply_removal_policy(RemovalPolicy.DESTROY)
            Tags.of(address).add("Name", config.name("egress"))
        self.vpc = ec2.Vpc(
            self,
            "Vpc",
            vpc_name=config.name("egress"),
            ip_addresses=ec2.IpAddresses.cidr(config.egress_cidr),
            max_azs=config.egress_azs,
            nat_gateways=config.nat_gateways,
            nat_gateway_provider=ec2.NatProvider.gateway(
                eip_allocation_ids=[address.attr_allocation_id for address in self.addresses]
            ),
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name=PUBLIC, subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=28, map_public_ip_on_launch=False
                ),
                # Lambda shares one network interface per subnet and security group between its
                # execution environments: a /24 holds the fleet many times over.
                ec2.SubnetConfiguration(name=PRIVATE, subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=24),
            ],
            restrict_default_security_group=True,
            # The gateway endpoints: DynamoDB and S3 never pass through NAT, whatever a run writes.
            gateway_endpoints={
                "DynamoDb": ec2.GatewayVpcEndpointOptions(
                    service=ec2.GatewayVpcEndpointAwsService.DYNAMODB,
                    subnets=[ec2.SubnetSelection(subnet_group_name=PRIVATE)],
                ),
                "S3": ec2.GatewayVpcEndpointOptions(
                    service=ec2.GatewayVpcEndpointAwsService.S3,
                    subnets=[ec2.SubnetSelection(subnet_group_name=PRIVATE)],
                ),
            },
        )
        self.flow_logs_group = logs.LogGroup(
            self,
            "FlowLogs",
            log_group_name=f"/sluice/{config.name('egress')}/flow-logs",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        role = iam.Role(self, "FlowLogsRole", assumed_by=iam.ServicePrincipal("vpc-flow-logs.amazonaws.com"))
        # Every flow, accepted or rejected, at the 10-minute aggregation: which address a fetcher reached
        # and when, so a block can be traced to its route, at the fewest records.
        self.flow_log = self.vpc.add_flow_log(
            "Flows",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_logs_group, role),
            traffic_type=ec2.FlowLogTrafficType.ALL,
            max_aggregation_interval=ec2.FlowLogMaxAggregationInterval.TEN_MINUTES,
        )
        # Egress only: nothing may connect in; out, TCP to any address (the sites, and the AWS APIs NAT reaches).
        self.security_group = ec2.SecurityGroup(
            self,
            "Fetchers",
            vpc=self.vpc,
            description="Sluice fetchers: no inbound rule; outbound TCP only, to the sites and AWS APIs",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.all_tcp(), "The sites and the AWS APIs")

    @property
    def subnets(self) -> ec2.SubnetSelection:
        """Where the functions that fetch run."""
        return ec2.SubnetSelection(subnet_group_name=PRIVATE)

    @property
    def public_ips(self) -> list[str]:
        """The Elastic IPs' addresses (tokens until deployed)."""
        return [address.attr_public_ip for address in self.addresses]

    def outputs(self, stack: Stack) -> None:
        """Each Elastic IP, and all of them on one line: what to hand to a site's owner."""
        for n, address in enumerate(self.addresses, start=1):
            CfnOutput(
                stack,
                f"EgressIp{n}",
                value=address.attr_public_ip,
                description=f"Fixed egress address {n} of {len(self.addresses)}: every crawl request leaves from these",
            )
        CfnOutput(
            stack,
            "EgressIps",
            value=Fn.join(",", self.public_ips),
            description="Every fixed egress address, comma-separated: the list a site's owner allowlists",
        )
        CfnOutput(stack, "EgressVpc", value=self.vpc.vpc_id, description="The VPC the fetchers run in")
